/**
 * `crm-relay serve` keeps V8's compiled code of its script (dist/serve.js)
 * between runs (bin/crm-relay.js, src/config/CodeCache.ts): the built
 * binary, started and stopped as an operator would, on the suite's database
 * (embedded, or PostgreSQL with DATABASE_URL). NODE_DEBUG=crm-relay makes the
 * binary say on stderr what became of the cache.
 */
import { describe, expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Effect, Option, Redacted, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"
import { request } from "./support/TestServer.js"

/** One MASTER_KEY for the whole file: on PostgreSQL its tests share one database, whose integration keys' tag secret is sealed under the key that created it. */
const FILE_MASTER_KEY = randomBytes(32).toString("base64")

/** A data directory and Node's compile cache directory of the test's own; the suite's database. */
const environment = Effect.gen(function*() {
  const db = yield* TestDatabase.TestDatabase
  const dir = yield* tempDir("crm-relay-code-cache-")
  const dataDir = Path.join(dir, "data")
  const cacheDir = Path.join(dir, "compile-cache")
  const env: Record<string, string> = { DATA_DIR: dataDir, NODE_COMPILE_CACHE: cacheDir, NODE_DEBUG: "crm-relay", LOG_LEVEL: "Warning" }
  if (Option.isSome(db.url)) {
    env["DATABASE_URL"] = Redacted.value(db.url.value)
    env["MASTER_KEY"] = FILE_MASTER_KEY
  }
  return { dataDir, cacheDir, env }
})

/** The serve script's cache files in `cacheDir` (Node puts them in a directory per Node version). */
const cacheFiles = (cacheDir: string): Array<string> =>
  Fs.existsSync(cacheDir)
    ? Fs.readdirSync(cacheDir, { recursive: true, encoding: "utf8" })
      .filter((file) => /(^|\/)crm-relay-serve-[^/]*\.v8$/.test(file))
      .map((file) => Path.join(cacheDir, file))
    : []

/**
 * Starts `crm-relay serve`, waits until it answers on its public port, runs
 * `check` on its stderr (waiting for it to hold: the cache is saved a second
 * after start), and stops it with SIGTERM.
 */
const startAndStop = (dataDir: string, env: Record<string, string>, check: (stderr: string) => boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const server = yield* serve(env)
    const info = yield* ServerFile.running(dataDir).pipe(
      Effect.flatMap(Effect.orElseFail(() => "not yet")),
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
      Effect.orDie
    )
    // It serves: a request without a key is refused as the contract says, by the server that loaded the cache.
    expect((yield* request("GET", `${info.publicUrl}/perform-list`)).status).toBe(401)
    yield* Eventually.eventually(Effect.sync(() => check(server.stderr())))
    const stderr = server.stderr()
    expect(yield* server.terminate).toBe(0)
    return stderr
  }))

/** A test's environment, after a first start has saved the cache: `file`. */
const savedCache = Effect.gen(function*() {
  const context = yield* environment
  yield* startAndStop(context.dataDir, context.env, (stderr) => stderr.includes(": saved"))
  const files = cacheFiles(context.cacheDir)
  expect(files).toHaveLength(1)
  return { ...context, file: files[0]! }
})

describe("crm-relay serve's code cache", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })("the built binary", (it) => {
    it.scoped("a start saves the script's compiled code after it has started; the next start compiles nothing it cached and runs from it", () =>
      Effect.gen(function*() {
        const { cacheDir, dataDir, env } = yield* environment
        const first = yield* startAndStop(dataDir, env, (stderr) => stderr.includes(": saved"))
        expect(first).toMatch(/code cache \S+: none\n/)
        const [file] = cacheFiles(cacheDir)
        expect(cacheFiles(cacheDir)).toHaveLength(1)
        // Only the user who runs the server can read or change it: it is code the next start runs.
        expect(Fs.statSync(file!).mode & 0o777).toBe(0o600)
        // V8 takes it: it was made under the flags the next start compiles with, though the server
        // had set its heap's (and, embedded, PGlite's WebAssembly) flags by then (V8Flags.withDefaults).
        const second = yield* startAndStop(dataDir, env, () => true)
        expect(second).toMatch(/code cache \S+: accepted\n/)
        expect(second).not.toContain(": saved")
        expect(cacheFiles(cacheDir)).toEqual([file])
      }), { timeout: PROCESS_TEST_TIMEOUT })

    it.scoped("a cache V8 refuses (damaged, say) costs only a compile: the server starts and replaces it, removing earlier builds' caches", () =>
      Effect.gen(function*() {
        const { dataDir, env, file } = yield* savedCache
        const garbage = randomBytes(Fs.statSync(file).size)
        Fs.writeFileSync(file, garbage)
        // What an earlier build of this checkout saved (the name ends in the script's size, inode and
        // modification time), and what a save that crashed left: the next save removes both.
        const earlier = file.replace(/-\d+-\d+-\d+\.v8$/, "-1-2-3.v8")
        Fs.writeFileSync(earlier, garbage)
        Fs.writeFileSync(`${file}.12345.tmp`, garbage)
        const refused = yield* startAndStop(dataDir, env, (stderr) => stderr.includes(": replaced"))
        expect(refused).toMatch(/code cache \S+: refused\n/)
        expect(Fs.readFileSync(file).equals(garbage)).toBe(false)
        expect(Fs.readdirSync(Path.dirname(file)).filter((name) => name.startsWith("crm-relay-serve-"))).toEqual([Path.basename(file)])
        expect(yield* startAndStop(dataDir, env, () => true)).toMatch(/code cache \S+: accepted\n/)
      }), { timeout: PROCESS_TEST_TIMEOUT })

    it.scoped("a cache others may write, or (run as root) another user's, is code nobody vouches for: it is ignored, never run, and replaced", () =>
      Effect.gen(function*() {
        const { dataDir, env, file } = yield* savedCache
        // A valid cache (V8 would take it), only its mode changed: the binary must not even read it.
        Fs.chmodSync(file, 0o666)
        const writable = yield* startAndStop(dataDir, env, (stderr) => stderr.includes(": saved"))
        expect(writable).toMatch(/code cache \S+: ignored \(not the server's user's own, or others may write it\)\n/)
        expect(writable).not.toContain(": accepted")
        expect(Fs.statSync(file).mode & 0o777).toBe(0o600)
        // Only root can give a file away; a test run as another user has shown the rule above.
        if (process.getuid?.() === 0) {
          Fs.chownSync(file, 65534, 65534)
          const foreign = yield* startAndStop(dataDir, env, (stderr) => stderr.includes(": saved"))
          expect(foreign).toContain("ignored (not the server's user's own")
          expect(Fs.statSync(file).uid).toBe(0)
        }
        expect(yield* startAndStop(dataDir, env, () => true)).toMatch(/code cache \S+: accepted\n/)
      }), { timeout: PROCESS_TEST_TIMEOUT })

    it.scoped("NODE_DISABLE_COMPILE_CACHE=1 turns it off with Node's own: the binary looks for no cache and offers to save none", () =>
      Effect.gen(function*() {
        const { cacheDir, dataDir, env } = yield* environment
        const stderr = yield* startAndStop(dataDir, { ...env, NODE_DISABLE_COMPILE_CACHE: "1" }, () => true)
        expect(stderr).toContain("code cache (Node's compile cache is off): none")
        expect(stderr).not.toContain(": saved")
        expect(cacheFiles(cacheDir)).toEqual([])
      }), { timeout: PROCESS_TEST_TIMEOUT })

    it.scoped("with --enable-source-maps `serve` runs from main.js's chunks, whose stack traces Node maps (it maps no script it did not load)", () =>
      Effect.gen(function*() {
        const { cacheDir, dataDir, env } = yield* environment
        const stderr = yield* startAndStop(dataDir, { ...env, NODE_OPTIONS: "--enable-source-maps" }, () => true)
        expect(stderr).not.toContain("code cache")
        expect(cacheFiles(cacheDir)).toEqual([])
      }), { timeout: PROCESS_TEST_TIMEOUT })
  })
})
