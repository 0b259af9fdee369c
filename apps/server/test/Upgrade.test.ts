/**
 * Upgrades, with the built binary on both databases: `migrate --status`
 * says what is applied, pending and unknown; a database a newer release
 * migrated is refused by `serve` and by every command that opens it, before
 * anything is written.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, Migrations, TestDatabase } from "@crm-relay/store"
import { Effect, Layer, Option, Redacted, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"

/** A fresh DATA_DIR, and on PostgreSQL the URL of `schema` (the test's own by default). */
const environment = (schema?: string) =>
  Effect.gen(function*() {
    const db = yield* TestDatabase.TestDatabase
    const dataDir = Path.join(yield* tempDir("crm-relay-upgrade-"), "data")
    const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning" }
    if (Option.isSome(db.url)) {
      const url = schema === undefined ? db.url.value : TestDatabase.withSearchPath(db.url.value, schema)
      env["DATABASE_URL"] = Redacted.value(url)
      env["MASTER_KEY"] = randomBytes(32).toString("base64")
    }
    return { db, dataDir, env }
  })

/** Runs `f` on the database the commands use: the test schema on PostgreSQL, DATA_DIR's embedded one otherwise. */
const onDatabase = <A, E>(
  db: TestDatabase.TestDatabase["Type"],
  dataDir: string,
  f: Effect.Effect<A, E, SqlClient.SqlClient>
) =>
  db.kind === "postgres" ? f : f.pipe(Effect.provide(Layer.fresh(Database.layerPglite({ dataDir }))), Effect.orDie)

const newest = Migrations.list().at(-1)!
const future = { id: newest[0] + 1000, name: "from_a_newer_release" }

/** What a refusal must leave as it was: the recorded migrations, the tables, and the files of DATA_DIR. */
const state = (db: TestDatabase.TestDatabase["Type"], dataDir: string) =>
  Effect.zip(
    onDatabase(
      db,
      dataDir,
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.all([
          sql`SELECT id, name, applied_at::text AS at FROM ${sql(Migrations.TABLE)} ORDER BY id`,
          sql`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`,
          sql`SELECT count(*)::int4 AS n FROM accounts`
        ]))
    ),
    Effect.sync(() => Fs.existsSync(dataDir) ? Fs.readdirSync(dataDir).sort() : [])
  )

const parse = <A>(text: string): A => JSON.parse(text.trim()) as A

layer(TestDatabase.layer, { excludeTestServices: true })("Upgrades", (it) => {
  it.scoped("migrate --status lists the pending migrations of a fresh database, then every one applied, and exits 0", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase.TestDatabase
      const sql = yield* SqlClient.SqlClient
      // On PostgreSQL a schema of its own, never migrated; on the embedded database a fresh DATA_DIR.
      const fresh = db.kind === "postgres" ? `${Option.getOrThrow(db.schema)}_fresh` : undefined
      if (fresh !== undefined) {
        yield* Effect.acquireRelease(sql`CREATE SCHEMA ${sql(fresh)}`, () => sql`DROP SCHEMA ${sql(fresh)} CASCADE`.pipe(Effect.ignore))
      }
      const { env } = yield* environment(fresh)
      const before = yield* cli(["migrate", "--status", "--json"], env)
      expect(before.code, before.stderr).toBe(0)
      expect(parse(before.stdout)).toEqual({
        applied: [],
        pending: Migrations.list().map(([id, name]) => ({ id, name })),
        unknown: []
      })
      const text = yield* cli(["migrate", "--status"], env)
      expect(text.code, text.stderr).toBe(0)
      expect(text.stdout).toContain(`Pending (${Migrations.list().length}):`)
      expect(text.stdout).toContain(`  ${Migrations.label(...newest)}`)

      expect((yield* cli(["migrate"], env)).code).toBe(0)
      const after = yield* cli(["migrate", "--status", "--json"], env)
      expect(after.code, after.stderr).toBe(0)
      const status = parse<Migrations.Status>(after.stdout)
      expect(status.applied.map(({ id, name }) => [id, name])).toEqual(Migrations.list())
      for (const row of status.applied) expect(Number.isNaN(Date.parse(row.applied_at))).toBe(false)
      expect([status.pending, status.unknown]).toEqual([[], []])
    }), PROCESS_TEST_TIMEOUT)

  it.scoped("with a server running, migrate --status answers through it (on the embedded database, which the server holds)", () =>
    Effect.gen(function*() {
      const { dataDir, env } = yield* environment()
      const server = yield* serve(env)
      yield* ServerFile.running(dataDir).pipe(
        Effect.flatMap(Effect.orElseFail(() => "not yet")),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
        Effect.orDie
      )
      const status = yield* cli(["migrate", "--status", "--json"], env)
      expect(status.code, status.stderr).toBe(0)
      const found = parse<Migrations.Status>(status.stdout)
      expect(found.applied.map(({ id, name }) => [id, name])).toEqual(Migrations.list())
      expect([found.pending, found.unknown]).toEqual([[], []])
      expect(yield* server.terminate).toBe(0)
    }), PROCESS_TEST_TIMEOUT)

  it.scoped(
    "a database a newer release migrated: serve and every command refuse it in one sentence (exit 2) and change nothing; migrate --status names it",
    () =>
      Effect.gen(function*() {
        const { dataDir, db, env } = yield* environment()
        const migrated = yield* cli(["migrate"], env)
        expect(migrated.code, migrated.stderr).toBe(0)
        // What a newer release leaves behind: one more migration recorded.
        yield* onDatabase(
          db,
          dataDir,
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql`INSERT INTO ${sql(Migrations.TABLE)} (id, name) VALUES (${future.id}, ${future.name})`)
        )
        const before = yield* state(db, dataDir)

        const sentence = new RegExp(
          `^The database was migrated by a newer release of crm-relay \\(it holds migration ${
            Migrations.label(future.id, future.name)
          }, applied [^;]+; this build knows migrations up to ${
            Migrations.label(...newest)
          }\\): run that newer release, or restore a backup made by this one with crm-relay db restore; nothing was changed\\.\\n$`
        )
        const server = yield* serve(env)
        const code = yield* server.exited.pipe(Effect.timeout(SERVE_START_BOUND))
        expect(code, server.stderr()).toBe(2)
        expect(server.stderr()).toMatch(sentence)
        expect(server.stdout()).toBe("")

        for (const args of [["accounts", "create", "--name", "Acme"], ["migrate"], ["deliveries", "list", "--status", "failed"]]) {
          const run = yield* cli(args, env)
          expect([run.code, run.stdout], args.join(" ")).toEqual([2, ""])
          expect(run.stderr, args.join(" ")).toMatch(sentence)
        }
        expect(yield* state(db, dataDir)).toEqual(before)

        const status = yield* cli(["migrate", "--status", "--json"], env)
        expect(status.code, status.stderr).toBe(0)
        const found = parse<Migrations.Status>(status.stdout)
        expect(found.unknown).toEqual([{ ...future, applied_at: expect.any(String) }])
        expect(found.pending).toEqual([])
        const text = yield* cli(["migrate", "--status"], env)
        expect(text.stdout).toContain(`Unknown to this build (1):\n  ${Migrations.label(future.id, future.name)}  applied `)
        expect(yield* state(db, dataDir)).toEqual(before)
      }),
    PROCESS_TEST_TIMEOUT
  )
})
