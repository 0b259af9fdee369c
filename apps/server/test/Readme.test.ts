import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as Settings from "../src/config/Settings.js"
import * as SettingsDoc from "../src/config/SettingsDoc.js"

const readme = readFileSync(join(import.meta.dirname, "..", "..", "..", "README.md"), "utf8")

describe("README", () => {
  it("its configuration table is the one the binary reads (run `npm run readme` when this fails)", () => {
    expect(readme).toContain(SettingsDoc.BEGIN)
    expect(SettingsDoc.withTable(readme, Settings.table)).toBe(readme)
  })

  it("states the two commands: npm install && npm start, and npm test", () => {
    expect(readme).toContain("npm install && npm start")
    expect(readme).toMatch(/^npm test\b/m)
  })
})
