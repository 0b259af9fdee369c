/**
 * The release's single executable (`npm run release`), run as an operator
 * would: copied alone into an empty folder and started with an environment
 * that has no Node, as an unprivileged user. Every command, the server on
 * its embedded database (and on PostgreSQL when DATABASE_URL is set) with a
 * call delivered to a loopback HTTPS receiver, and the refusals an operator
 * meets first: a DATA_DIR it cannot write, a port already taken. Its
 * commands run on the compiled code the release made of their script.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { Certificate, WebhookReceiver } from "@crm-relay/testing"
import { Effect, Option, Redacted, Schedule } from "effect"
import { execFileSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { VERSION } from "../src/config/Version.js"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, SERVE_START_BOUND } from "./support/Cli.js"
import { emptyFolderWithExecutable, release, RELEASE, ROOT, run, serve } from "./support/Release.js"
import { roundTrip } from "./support/RoundTrip.js"
import { tempDir } from "./support/TempDir.js"

/** `crm-relay serve` in `folder` on `dataDir` (and `env`): the round trip, a CLI command through it, SIGTERM → 0. */
const serveAndRoundTrip = (folder: string, dataDir: string, env: Record<string, string>, receiver: WebhookReceiver.Receiver) =>
  Effect.scoped(Effect.gen(function*() {
    const adminToken = randomBytes(24).toString("base64url")
    const server = yield* serve(folder, { ...env, DATA_DIR: dataDir, ADMIN_TOKEN: adminToken, PORT: "0", ADMIN_PORT: "0", PORTAL_PORT: "0", LOG_LEVEL: "Warning" })
    const info = yield* ServerFile.running(dataDir).pipe(
      Effect.flatMap(Effect.orElseFail(() => "not yet")),
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
      Effect.orDieWith(() => new Error(`serve published no address:\n${server.stderr()}`))
    )
    const created = yield* roundTrip({ adminUrl: info.adminUrl, publicUrl: info.publicUrl ?? "", adminToken }, receiver)
    // The CLI finds the running server through DATA_DIR (no database setting: it must go through the server).
    const listed = yield* run(folder, ["subscriptions", "list", "--account", created.accountId, "--json"], { DATA_DIR: dataDir, ADMIN_TOKEN: adminToken })
    expect(listed.stderr).toBe("")
    expect(listed.code).toBe(0)
    expect(listed.stdout).toContain(created.subscriptionId)
    expect(yield* server.terminate).toBe(0)
  }))

describe("the release's executable (npm run release)", () => {
  it.live("release/ holds the tarball (the executable and a short README), SHA256SUMS that verify, and a CycloneDX SBOM of what it carries", () => Effect.gen(function*() {
    yield* release
    const name = `crm-relay-${VERSION}-linux-x64`
    const listed = execFileSync("tar", ["-tzf", Path.join(RELEASE, `${name}.tar.gz`)], { encoding: "utf8" }).trim().split("\n").sort()
    expect(listed).toEqual([`${name}/`, `${name}/README.md`, `${name}/crm-relay`])
    const sums = Fs.readFileSync(Path.join(RELEASE, "SHA256SUMS"), "utf8").trim().split("\n")
    expect(sums.map((line) => line.split("  ")[1]).sort()).toEqual([`${name}.cdx.json`, `${name}.tar.gz`, "crm-relay"].sort())
    for (const line of sums) {
      const [sum, file] = line.split("  ") as [string, string]
      expect(createHash("sha256").update(Fs.readFileSync(Path.join(RELEASE, file))).digest("hex")).toBe(sum)
    }
    const sbom = JSON.parse(Fs.readFileSync(Path.join(RELEASE, `${name}.cdx.json`), "utf8")) as {
      bomFormat: string
      specVersion: string
      components: ReadonlyArray<{ name: string; version: string; purl: string; licenses: ReadonlyArray<{ expression: string }> }>
    }
    expect(sbom.bomFormat).toBe("CycloneDX")
    const component = (name: string) => sbom.components.find((c) => c.name === name)
    // Node itself, the one the executable is built from (the pinned Node that runs the tests).
    expect(component("node")?.version).toBe(process.version.slice(1))
    expect(component("effect")).toMatchObject({ version: "3.22.4", purl: "pkg:npm/effect@3.22.4", licenses: [{ expression: "MIT" }] })
    expect(component("@electric-sql/pglite")).toMatchObject({ purl: "pkg:npm/%40electric-sql/pglite@0.5.14", licenses: [{ expression: "Apache-2.0" }] })
    // Only what the executable carries: no build tool, no test library.
    for (const absent of ["esbuild", "vitest", "typescript", "postject"]) expect(component(absent)).toBeUndefined()
  }), PROCESS_TEST_TIMEOUT)

  it.scopedLive("carries the compiled code of its commands' script, which V8 takes; one V8 refuses (another V8 flag) is ignored, and nothing is written", () => Effect.gen(function*() {
    yield* release
    const folder = yield* tempDir("crm-relay-release-cache-")
    emptyFolderWithExecutable(folder)
    // NODE_DEBUG=crm-relay tells on stderr what became of the code cache the release made (release.ts).
    const taken = yield* run(folder, ["--help"], { NODE_DEBUG: "crm-relay" })
    expect(taken.code).toBe(0)
    expect(taken.stdout).toContain("migrate")
    expect(taken.stderr).toMatch(/code cache cli\.js\.v8: accepted/)
    // V8 hashes the flags a cache was made under: another one in NODE_OPTIONS, and the command compiles as it would without.
    const refused = yield* run(folder, ["--help"], { NODE_DEBUG: "crm-relay", NODE_OPTIONS: "--stack-trace-limit=50" })
    expect(refused.code).toBe(0)
    expect(refused.stdout).toBe(taken.stdout)
    expect(refused.stderr).toMatch(/code cache cli\.js\.v8: refused/)
    // The cache is read from the executable: nothing beside it (an image's root is read-only).
    expect(Fs.readdirSync(folder).sort()).toEqual(["crm-relay", "empty-path"])
  }), PROCESS_TEST_TIMEOUT)

  // Real time: the test waits on a process and the network, never on the TestClock.
  layer(TestDatabase.layer, { timeout: PROCESS_TEST_TIMEOUT, excludeTestServices: true })((it) => {
    it.scoped("runs alone from an empty folder with no Node: --version, --help, serve with a signed delivery, the CLI, SIGTERM", () =>
      Effect.gen(function*() {
        yield* release
        const folder = yield* tempDir("crm-relay-release-")
        emptyFolderWithExecutable(folder)

        // "crm-relay --version prints the version, the commit and the Node version it carries"; a dirty tree says so.
        const version = yield* run(folder, ["--version"])
        expect(version.code).toBe(0)
        const commit = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim()
        const dirty = execFileSync("git", ["status", "--porcelain"], { cwd: ROOT, encoding: "utf8" }).trim() !== ""
        expect(version.stdout.trim()).toBe(`${VERSION} (commit ${commit}${dirty ? ", dirty tree" : ""}, node ${process.version})`)
        const help = yield* run(folder, ["--help"])
        expect(help.code).toBe(0)
        for (const command of ["serve", "migrate", "accounts create", "bridge check", "portal link"]) expect(help.stdout).toContain(command)

        // Bad input, one sentence each and a non-zero exit: a DATA_DIR it cannot write…
        const locked = Path.join(folder, "locked")
        Fs.mkdirSync(locked, { mode: 0o555 })
        const masterKey = randomBytes(32).toString("base64")
        const unwritable = yield* run(folder, ["serve"], { DATA_DIR: Path.join(locked, "data"), MASTER_KEY: masterKey, ADMIN_TOKEN: "x".repeat(32) })
        expect(unwritable.code).toBe(1)
        expect(unwritable.stderr.trim()).toMatch(new RegExp(`^DATA_DIR ${Path.join(locked, "data")} cannot be written by [^\\n]+\\.$`))
        // …an internal API bound beyond loopback with no ADMIN_TOKEN (only DATA_DIR would hold a generated one)…
        const open = yield* run(folder, ["serve"], { DATA_DIR: Path.join(folder, "open"), ADMIN_HOST: "0.0.0.0", MASTER_KEY: masterKey })
        expect(open.code).toBe(1)
        expect(open.stderr.trim()).toBe(
          "ADMIN_TOKEN must be set: ADMIN_HOST is 0.0.0.0, so the internal API is reachable from other hosts, and a token generated into DATA_DIR is not one their operators were given."
        )
        // …and a port already taken.
        const taken = yield* Effect.acquireRelease(
          Effect.async<Net.Server>((resume) => {
            const server = Net.createServer().listen(0, () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const port = String((taken.address() as Net.AddressInfo).port)
        const busy = yield* run(folder, ["serve"], { DATA_DIR: Path.join(folder, "busy"), PORT: port, ADMIN_PORT: "0", PORTAL_PORT: "0", MASTER_KEY: masterKey, ADMIN_TOKEN: "x".repeat(32), LOG_LEVEL: "Warning" })
        expect(busy.code).toBe(1)
        expect(busy.stderr.trim()).toMatch(new RegExp(`^Could not listen: [^\\n]*EADDRINUSE[^\\n]*${port}\\.$`))

        // A loopback HTTPS receiver whose certificate the executable trusts through NODE_EXTRA_CA_CERTS.
        const ca = yield* Certificate.generateAuthority()
        const caFile = Path.join(folder, "ca.pem")
        Fs.writeFileSync(caFile, ca.cert, { mode: 0o644 })
        const receiver = yield* WebhookReceiver.startReceiver(yield* Certificate.issue(ca))
        const egress = { EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile }

        yield* serveAndRoundTrip(folder, Path.join(folder, "data"), egress, receiver)
        const db = yield* TestDatabase.TestDatabase
        if (Option.isSome(db.url)) {
          yield* serveAndRoundTrip(folder, Path.join(folder, "data-postgres"), { ...egress, DATABASE_URL: Redacted.value(db.url.value), MASTER_KEY: masterKey }, receiver)
        }
        // It wrote only under its DATA_DIRs (and nothing in the folder it was started from, or on PATH).
        expect(Fs.readdirSync(folder).sort()).toEqual(
          ["busy", "ca.pem", "crm-relay", "data", ...(Option.isSome(db.url) ? ["data-postgres"] : []), "empty-path", "locked", "open"].sort()
        )
        expect(Fs.readdirSync(Path.join(folder, "empty-path"))).toEqual([])
        expect(Fs.readdirSync(locked)).toEqual([])
      }), PROCESS_TEST_TIMEOUT)
  })
})
