/**
 * The copy Zapier's CLI pushes (`npm run standalone`): the app's files, the
 * build setting it needs, and a package.json without the workspace's packages
 * (which are not on the registry), pinned like the workspace.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import pkg from "../package.json" with { type: "json" }
import { writeStandalone } from "../scripts/StandaloneApp.mjs"

describe("npm run standalone", () => {
  it("writes index.js, lib/, .zapierapprc and a package.json of zapier-platform-core and zapier-platform-cli only, exactly pinned; refuses a non-empty directory", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-zapier-standalone-"))
    try {
      const target = Path.join(dir, "app")
      expect(writeStandalone(target)).toBe(true)
      expect(Fs.readdirSync(target).sort()).toEqual([".gitignore", ".zapierapprc", "index.js", "lib", "package.json"])
      expect(Fs.readFileSync(Path.join(target, "lib", "contract.json"), "utf8")).toBe(
        Fs.readFileSync(Path.join(import.meta.dirname, "..", "lib", "contract.json"), "utf8")
      )
      const written = JSON.parse(Fs.readFileSync(Path.join(target, "package.json"), "utf8")) as Record<string, unknown>
      expect(written).toMatchObject({
        main: "index.js",
        version: pkg.version,
        dependencies: { "zapier-platform-core": pkg.dependencies["zapier-platform-core"] },
        devDependencies: { "zapier-platform-cli": pkg.devDependencies["zapier-platform-cli"] }
      })
      expect(JSON.stringify(written)).not.toContain("@crm-relay/")
      expect(pkg.dependencies["zapier-platform-core"]).toMatch(/^19\.\d+\.\d+$/)
      // Node 22.12+ loads these packages' require.mjs, which Zapier's dependency tracing misses.
      const rc = JSON.parse(Fs.readFileSync(Path.join(target, ".zapierapprc"), "utf8")) as { includeInBuild: Array<string> }
      expect(rc.includeInBuild.some((pattern) => new RegExp(pattern).test("node_modules/async-function/require.mjs"))).toBe(true)
      expect(writeStandalone(target)).toBe(false)
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
