import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import * as Settings from "../src/config/Settings.js"
import * as SettingsDoc from "../src/config/SettingsDoc.js"

const ROOT = join(import.meta.dirname, "..", "..", "..")
const readme = readFileSync(join(ROOT, "README.md"), "utf8")
const configuration = readFileSync(join(ROOT, SettingsDoc.PAGE), "utf8")
// The page whose log line shapes list the audit actions.
const operating = readFileSync(join(ROOT, "docs", "operating.md"), "utf8")

/** The actions of every `Audit.record("…")` in the sources of the server and the libraries. */
const recordedActions = (): ReadonlySet<string> => {
  const actions = new Set<string>()
  for (const folder of ["apps/server/src", "libs"]) {
    for (const file of readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })) {
      if (!file.endsWith(".ts") || file.includes("node_modules") || file.includes("/test/")) continue
      for (const match of readFileSync(join(ROOT, folder, file), "utf8").matchAll(/Audit\.record\(\s*"([a-z_.]+)"/g)) actions.add(match[1]!)
    }
  }
  return actions
}

describe("README and docs", () => {
  it("docs/configuration.md's table is the one the binary reads (run `npm run docs` when this fails)", () => {
    expect(configuration).toContain(SettingsDoc.BEGIN)
    expect(SettingsDoc.withTable(configuration, Settings.table)).toBe(configuration)
  })

  it("the audit line's `action` row in docs/operating.md names every action the code records", () => {
    const row = operating.split("\n").find((line) => line.startsWith("| `action` |"))
    expect(row).toBeDefined()
    const documented = new Set([...row!.matchAll(/`([a-z_]+\.[a-z_.]+)`/g)].map((match) => match[1]!))
    const actions = recordedActions()
    expect(actions.size).toBeGreaterThan(10)
    expect([...actions].filter((action) => !documented.has(action))).toEqual([])
  })

  // Issue 41: "Every snippet an operator copies must survive a restart": a key or token made inline where the
  // server starts is a new one at every start (MASTER_KEY: the data is refused; ADMIN_TOKEN: nobody has it).
  it("no snippet an operator copies makes MASTER_KEY or ADMIN_TOKEN anew on the line that uses it", () => {
    const pages = [
      "README.md",
      "apps/server/release/README.md",
      ...readdirSync(join(ROOT, "docs")).filter((file) => file.endsWith(".md")).map((file) => join("docs", file)),
      ...readdirSync(join(ROOT, "deploy")).map((file) => join("deploy", file))
    ]
    const inline = pages.flatMap((page) =>
      readFileSync(join(ROOT, page), "utf8").split("\n").filter((line) => /\b(MASTER_KEY|ADMIN_TOKEN)=["']?\$\(/.test(line)).map((line) => `${page}: ${line.trim()}`)
    )
    expect(inline).toEqual([])
  })

  it("the README states the two commands: npm install && npm start, and npm test", () => {
    expect(readme).toContain("npm install && npm start")
    expect(readme).toMatch(/^npm test\b/m)
  })
})
