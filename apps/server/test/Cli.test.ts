import { describe, expect, it, layer } from "@effect/vitest"
import { IntegrationKeys, KeyTags } from "@crm-relay/events"
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, DataDirLock, Migrations, TestDatabase } from "@crm-relay/store"
import { randomBytes } from "node:crypto"
import { Eventually } from "@crm-relay/testing"
import { Deferred, Effect, Fiber, Layer, Option, Redacted, Schedule } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MasterKey from "../src/config/MasterKey.js"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"
import { bearer, request } from "./support/TestServer.js"

/** One MASTER_KEY for the whole file: on PostgreSQL its tests share one database, whose integration keys' tag secret is sealed under the key that created it. */
const FILE_MASTER_KEY = randomBytes(32).toString("base64")

/** The environment of a command: a fresh DATA_DIR, and the test schema's URL on PostgreSQL. */
const environment = Effect.gen(function*() {
  const db = yield* TestDatabase.TestDatabase
  const dataDir = Path.join(yield* tempDir("crm-relay-cli-"), "data")
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning" }
  if (Option.isSome(db.url)) {
    env["DATABASE_URL"] = Redacted.value(db.url.value)
    // With DATABASE_URL the server refuses to generate a master key (replicas would not share it).
    env["MASTER_KEY"] = FILE_MASTER_KEY
  }
  return { db, dataDir, env }
})

/** Every migration as `migrate --json` reports it. */
const allMigrations = Migrations.list().map(([id, name]) => ({ id, name }))

const parse = <A>(text: string): A => JSON.parse(text.trim()) as A

/** Whether `key` authenticates in the database the commands used (with their master key, which seals the keys' tag secret). */
const keyWorks = (db: TestDatabase.TestDatabase["Type"], dataDir: string, env: Record<string, string>, key: string) => {
  const masterKeys = MasterKey.resolve({
    masterKey: Option.map(Option.fromNullable(env["MASTER_KEY"]), Redacted.make),
    masterKeyPrevious: Option.none(),
    databaseUrl: db.url,
    dataDir
  }).pipe(Effect.orDie)
  const check = Effect.flatMap(IntegrationKeys.IntegrationKeys, (keys) => keys.authenticate(Redacted.make(key))).pipe(
    Effect.map(Option.isSome),
    Effect.provide(Layer.unwrapEffect(Effect.map(masterKeys, (keys) => IntegrationKeys.IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerWith(keys))))))
  )
  return db.kind === "postgres"
    ? check
    : check.pipe(Effect.provide(Layer.fresh(Database.layerPglite({ dataDir }))), Effect.orDie)
}

/** The lines of `text` that are JSON objects (log lines), parsed. */
const jsonLines = (text: string): Array<Record<string, unknown>> =>
  text.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Record<string, unknown>)

describe("crm-relay --help", () => {
  it.live("--help works on every command and describes its options", () =>
    Effect.gen(function*() {
      const [root, accountsCreate, keysCreate, keysDisable, migrate, serveHelp] = yield* Effect.all([
        cli(["--help"], {}),
        cli(["accounts", "create", "--help"], {}),
        cli(["keys", "create", "--help"], {}),
        cli(["keys", "disable", "--help"], {}),
        cli(["migrate", "--help"], {}),
        cli(["serve", "--help"], {})
      ], { concurrency: 3 })
      for (const run of [root, accountsCreate, keysCreate, keysDisable, migrate, serveHelp]) expect(run.code, run.stderr).toBe(0)
      for (const command of ["serve", "migrate", "accounts", "keys"]) expect(root.stdout).toContain(command)
      expect(accountsCreate.stdout).toContain("--name")
      expect(accountsCreate.stdout).toContain("--mode")
      expect(accountsCreate.stdout).toContain("demo and sandbox: never")
      expect(keysCreate.stdout).toContain("--account")
      expect(keysCreate.stdout).toContain("the only time it is shown")
      expect(keysDisable.stdout).toContain("--key")
      expect(migrate.stdout).toContain("--json")
      expect(serveHelp.stdout).toContain("SIGTERM")
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.live("\"no colour unless a terminal\": piped help is plain, 80 columns, with the full command path; `crm-relay help <command...>` and `--help` print the same", () =>
    Effect.gen(function*() {
      const [root, helpRoot, viaHelp, viaFlag, unknown, group, viaHelpGroup, typo] = yield* Effect.all([
        cli(["--help"], {}),
        cli(["help"], {}),
        cli(["help", "pushes", "list"], {}),
        cli(["pushes", "list", "--status", "failed", "--help"], {}),
        cli(["help", "pushes", "lsit"], {}),
        cli(["pushes"], {}),
        cli(["help", "pushes"], {}),
        cli(["pushes", "lsit", "--json"], {})
      ], { concurrency: 3 })
      // A group named alone shows its help, not the renderer's; a mistyped command names the commands there are.
      expect(group).toEqual(viaHelpGroup)
      expect(group.stdout).toContain("  crm-relay pushes <command> [options]")
      expect(group.stdout).toMatch(/^ {2}pushes replay {2,}Run a failed CRM push job again/m)
      expect(typo.code, typo.stderr).toBe(2)
      expect(typo.stderr).toEqual(unknown.stderr)
      expect(root.stdout).not.toMatch(/\u001b/)
      for (const line of root.stdout.split("\n")) expect(line.length).toBeLessThanOrEqual(80)
      expect(helpRoot).toEqual(root)
      expect(viaFlag).toEqual(viaHelp)
      expect(viaHelp.code, viaHelp.stderr).toBe(0)
      expect(viaHelp.stdout).toContain("  crm-relay pushes list [--account <text>] [--status <text>...]")
      expect(viaHelp.stdout).not.toContain("This setting is optional.")
      expect(unknown.code, unknown.stderr).toBe(2)
      expect(unknown.stderr.trim()).toBe(
        "There is no command `crm-relay pushes lsit`; the commands of `crm-relay pushes` are list, replay. Run `crm-relay help pushes` for what each does."
      )
    }), { timeout: PROCESS_TEST_TIMEOUT })
})

layer(TestDatabase.layer, { excludeTestServices: true })("crm-relay commands", (it) => {
  it.scoped("without a running server: migrate, accounts create, keys create and keys disable work on the database directly", () =>
    Effect.gen(function*() {
      const { dataDir, db, env } = yield* environment
      const migrated = yield* cli(["migrate", "--json"], env)
      expect(migrated.code, migrated.stderr).toBe(0)
      expect(parse<{ applied: Array<unknown> }>(migrated.stdout).applied).toEqual(
        db.kind === "pglite" ? allMigrations : []
      )
      expect((yield* cli(["migrate"], env)).stdout.trim()).toBe("The database is up to date.")

      const created = yield* cli(["accounts", "create", "--name", "Acme Plumbing", "--mode", "demo", "--json"], env)
      expect(created.code, created.stderr).toBe(0)
      const account = parse<{ id: string; name: string; mode: string }>(created.stdout)
      expect(account).toMatchObject({ name: "Acme Plumbing", mode: "demo" })
      // A change made directly on the database is audited (on stderr) as the CLI's.
      expect(jsonLines(created.stderr).filter((line) => line["log"] === "audit")).toEqual([
        expect.objectContaining({ action: "account.created", actor: "cli", account_id: account.id })
      ])

      const text = yield* cli(["accounts", "create", "--name", "Default mode"], env)
      expect(text.stdout).toMatch(/^Created account [0-9a-f-]{36} \(name: Default mode, mode: live\)\.$/m)

      const keyRun = yield* cli(["keys", "create", "--account", account.id, "--json"], env)
      expect(keyRun.code, keyRun.stderr).toBe(0)
      const key = parse<{ id: string; key: string }>(keyRun.stdout)
      // 32 random bytes and their 16-byte tag, in base64url.
      expect(key.key).toMatch(/^crk_[A-Za-z0-9_-]{64}$/)
      expect(yield* keyWorks(db, dataDir, env, key.key)).toBe(true)

      const disabled = yield* cli(["keys", "disable", "--key", key.id, "--json"], env)
      expect(parse(disabled.stdout)).toEqual({ id: key.id, disabled: true })
      expect(yield* keyWorks(db, dataDir, env, key.key)).toBe(false)

      const unknown = yield* cli(["keys", "create", "--account", "0f8fad5b-d9cb-469f-a165-70867728950e"], env)
      expect(unknown.code, unknown.stderr).toBe(2)
      expect(unknown.stderr).toContain("No account with id 0f8fad5b-d9cb-469f-a165-70867728950e exists.")
      expect(unknown.stdout).toBe("")
      const badMode = yield* cli(["accounts", "create", "--name", "X", "--mode", "production"], env)
      expect(badMode.code).not.toBe(0)
      // Nothing is left holding the embedded database.
      expect(yield* DataDirLock.holder(Database.pgliteDirectory(dataDir))).toEqual(Option.none())
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.scoped("when its stdout's reader goes away (`serve | head`), the server stops as on SIGTERM instead of crashing on EPIPE", () =>
    Effect.gen(function*() {
      const { dataDir, env } = yield* environment
      const server = yield* serve({ ...env, LOG_LEVEL: "Info" })
      const info = yield* ServerFile.running(dataDir).pipe(
        Effect.flatMap(Effect.orElseFail(() => "not yet")),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
        Effect.orDie
      )
      yield* server.closeStdout
      // Each request writes an access line to the closed pipe; the first write after the close fails with EPIPE.
      yield* Eventually.eventually(Effect.map(
        request("GET", `${info.publicUrl}/perform-list`, { headers: bearer("not-a-key") }).pipe(Effect.exit),
        () => server.stderr().includes("standard output was closed")
      ))
      expect(yield* server.exited).toBe(0)
      expect(server.stderr()).not.toContain("EPIPE")
      // A clean stop: the server file is removed and the embedded database's lock released.
      expect(Fs.existsSync(ServerFile.path(dataDir))).toBe(false)
      expect(yield* DataDirLock.holder(Database.pgliteDirectory(dataDir))).toEqual(Option.none())
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.scoped("with a running server: commands go through its internal API (never opening its data directory); SIGTERM stops it cleanly", () =>
    Effect.gen(function*() {
      const { dataDir, db, env } = yield* environment
      const server = yield* serve({ ...env, PORT: "0", ADMIN_PORT: "0", LOG_LEVEL: "Info", HEAP_SEMI_SPACE_MIB: "2" })
      const info = yield* ServerFile.running(dataDir).pipe(
        Effect.flatMap(Effect.orElseFail(() => "not yet")),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
        Effect.orDie
      )
      expect(info.pid).toBe(server.pid)
      // The heap budget the server holds to (config/Heap.ts; Heap.test shows what it does): the setting, and the default.
      expect(server.stdout().split("\n").filter((line) => line.includes("\"heap budget\"")).map((line) => JSON.parse(line)))
        .toMatchObject([{ level: "info", heap_semi_space_mib: 2, heap_growth_percent: 100 }])
      // A development server without ADMIN_TOKEN generates one, prints it once and keeps it in DATA_DIR.
      expect(server.stderr()).toMatch(/ADMIN_TOKEN=\S{20,}/)
      expect(Fs.statSync(Path.join(dataDir, "admin-token")).mode & 0o777).toBe(0o600)
      if (db.kind === "pglite") {
        expect(yield* DataDirLock.holder(Database.pgliteDirectory(dataDir))).toEqual(Option.some(server.pid))
      }

      const account = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "Live", "--json"], env)).stdout)
      const key = parse<{ id: string; key: string }>((yield* cli(["keys", "create", "--account", account.id, "--json"], env)).stdout)
      expect((yield* request("GET", `${info.publicUrl}/perform-list`, { headers: bearer(key.key) })).status).toBe(200)
      expect((yield* cli(["migrate", "--json"], env)).stdout.trim()).toBe("{\"applied\":[]}")
      expect((yield* cli(["keys", "disable", "--key", key.id], env)).code).toBe(0)
      expect((yield* request("GET", `${info.publicUrl}/perform-list`, { headers: bearer(key.key) })).status).toBe(401)

      // On PostgreSQL a request is held in flight (table lock) across SIGTERM and still answered.
      const second = parse<{ id: string; key: string }>((yield* cli(["keys", "create", "--account", account.id, "--json"], env)).stdout)
      const sql = yield* SqlClient.SqlClient
      const release = yield* Deferred.make<void>()
      const locked = yield* Deferred.make<void>()
      const holder = db.kind === "postgres"
        ? yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE rate_limits IN ACCESS EXCLUSIVE MODE`
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(release)
        })))
        : yield* Effect.fork(Deferred.succeed(locked, undefined).pipe(Effect.asVoid))
      yield* Deferred.await(locked)
      const inFlight = yield* Effect.fork(request("GET", `${info.publicUrl}/perform-list`, { headers: bearer(second.key) }))
      // On PostgreSQL the request is in flight once it waits for the lock; on PGlite (no lock to hold) it is answered first.
      if (db.kind === "postgres") {
        yield* Eventually.eventually(Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'rate_limits'::regclass AND NOT granted`,
          (rows) => rows[0]!.n > 0
        ))
      } else {
        yield* Fiber.await(inFlight)
      }
      const stopped = yield* Effect.fork(server.terminate)
      // The lock is released only once the server has started stopping.
      yield* Eventually.eventually(Effect.sync(() => server.stdout().includes("crm-relay is stopping")))
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect((yield* Fiber.join(inFlight)).status).toBe(200)

      expect(yield* Fiber.join(stopped)).toBe(0)
      expect(server.stdout()).toContain("crm-relay is stopping")
      // stdout is JSON lines only; the generated token went to stderr once and never into the log stream.
      const token = /ADMIN_TOKEN=(\S+)/.exec(server.stderr())![1]!
      expect(server.stderr().split(token).length - 1).toBe(1)
      expect(server.stdout()).not.toContain(token)
      const logged = jsonLines(server.stdout())
      expect(logged.length).toBe(server.stdout().split("\n").filter((line) => line !== "").length)
      for (const line of logged) expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "msg"])
      // Through the server (embedded database) the CLI's changes are the admin token's; on PostgreSQL it writes directly.
      expect(logged.filter((line) => line["action"] === "account.created" && line["account_id"] === account.id).map((line) => line["actor"]))
        .toEqual(db.kind === "pglite" ? ["admin_token"] : [])
      expect(Fs.existsSync(ServerFile.path(dataDir))).toBe(false)
      expect(yield* DataDirLock.holder(Database.pgliteDirectory(dataDir))).toEqual(Option.none())
      // Stopped: the CLI works on the database directly again.
      expect((yield* cli(["accounts", "create", "--name", "After", "--json"], env)).code).toBe(0)
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
