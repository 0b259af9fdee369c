/**
 * "Releases get a version: semver in package.json, bumped when a migration lands. CHANGELOG.md says, per
 * version, what changed for operators and which earlier versions can run beside it during an upgrade."
 * (issue 41)
 *
 * Each CHANGELOG.md entry names the newest migration of its release on a line `Newest migration: \`NNNN_name\``.
 * A migration added without a new version (and its entry) leaves the top entry naming an older one: this
 * fails then, and says what to do. Files only: no database, no build.
 */
import { Migrations } from "@crm-relay/store"
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { VERSION } from "../src/config/Version.js"

const ROOT = Path.resolve(import.meta.dirname, "..", "..", "..")
const read = (file: string) => Fs.readFileSync(Path.join(ROOT, file), "utf8")

interface Entry {
  readonly version: string
  readonly migration: string | undefined
}

/** The entries of CHANGELOG.md, newest first: `## <version>` headings, each with its `Newest migration:` line. */
const entries = (): ReadonlyArray<Entry> =>
  read("CHANGELOG.md").split(/^## /m).slice(1).map((section) => ({
    version: section.split(/\s/, 1)[0]!,
    migration: /^Newest migration: `(\d{4}_[a-z0-9_]+)`/m.exec(section)?.[1]
  }))

const semver = (version: string) => version.split(".").map(Number) as [number, number, number]

describe("the version and CHANGELOG.md", () => {
  const newest = Migrations.list().at(-1)!
  const newestLabel = Migrations.label(newest[0], newest[1])

  it("the server's version is the root package.json's, and the lockfile agrees", () => {
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+$/)
    expect((JSON.parse(read("package.json")) as { version: string }).version).toBe(VERSION)
    const lock = JSON.parse(read("package-lock.json")) as { version: string; packages: Record<string, { version?: string }> }
    expect([lock.version, lock.packages[""]?.version], "package-lock.json names another version: bump with `npm version <minor|patch> --no-git-tag-version`").toEqual([VERSION, VERSION])
  })

  it("the newest CHANGELOG.md entry is this version's and names the newest migration", () => {
    const [top] = entries()
    expect(top?.version, `CHANGELOG.md's newest entry is not ${VERSION} (package.json): add its entry at the top`).toBe(VERSION)
    expect(
      top?.migration,
      `The migrations folder's newest is ${newestLabel}, but CHANGELOG.md's entry for ${VERSION} names ${top?.migration ?? "none"}: ` +
        "a migration landed without a version; run `npm version minor --no-git-tag-version` and add its CHANGELOG.md entry (what changed, what runs beside it)."
    ).toBe(newestLabel)
  })

  it("every entry names a known migration, and a release that adds one bumps the minor version (or the major)", () => {
    const known = new Set(Migrations.list().map(([id, name]) => Migrations.label(id, name)))
    const list = entries()
    for (const entry of list) expect(known.has(entry.migration ?? ""), `CHANGELOG.md ${entry.version} names no known migration`).toBe(true)
    for (const [later, earlier] of list.slice(0, -1).map((entry, i) => [entry, list[i + 1]!] as const)) {
      const [laterMajor, laterMinor] = semver(later.version)
      const [earlierMajor, earlierMinor] = semver(earlier.version)
      expect(later.migration! >= earlier.migration!, `${later.version} names an older migration than ${earlier.version}`).toBe(true)
      if (later.migration !== earlier.migration) {
        expect(
          laterMajor > earlierMajor || (laterMajor === earlierMajor && laterMinor > earlierMinor),
          `${later.version} adds migrations to ${earlier.version} with only a patch bump`
        ).toBe(true)
      }
    }
  })
})
