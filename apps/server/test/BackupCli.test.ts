/**
 * `crm-relay db backup | restore | move`, run as an operator runs them, on
 * a database built here (an account, a key, a sealed secret): a backup
 * restores whole on both databases, and every bad input is refused in one
 * sentence with exit code 2, the target unchanged.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, Migrations, TestDatabase, Vault } from "@crm-relay/store"
import { Effect, Either, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { VERSION } from "../src/config/Version.js"
import { cli, PROCESS_TEST_TIMEOUT } from "./support/Cli.js"
import { freshPostgres } from "./support/FreshPostgres.js"
import { tempDir } from "./support/TempDir.js"

const MASTER_KEY = Vault.generateMasterKey()
const masterKeys: Vault.MasterKeys = { current: Either.getOrThrow(Vault.parseMasterKey(MASTER_KEY)), previous: [] }

/** An embedded database in `dataDir` with an account, a key and a sealed secret (no server running). */
const seedEmbedded = (dataDir: string) =>
  Effect.gen(function*() {
    yield* Migrations.run()
    const sql = yield* SqlClient.SqlClient
    const [account] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES ('Refusals', 'live') RETURNING id`
    yield* sql`INSERT INTO integration_keys (account_id, secret_hash) VALUES (${account!.id}, ${randomBytes(32)})`
    const vault = yield* Vault.make(masterKeys)
    yield* sql.withTransaction(vault.store(Redacted.make("a-bridge-credential"), "refusals-owner"))
  }).pipe(Effect.provide(Database.layerPglite({ dataDir }).pipe(Layer.orDie)), Logger.withMinimumLogLevel(LogLevel.Warning))

/** Rows per table of the embedded database in `dataDir`, or of the PostgreSQL database at `url`. */
const accountCount = (layer: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM accounts`).pipe(
    Effect.map((rows) => Number(rows[0]!.n)),
    Effect.provide(Layer.orDie(layer))
  )

const sha = (file: string) => createHash("sha256").update(Fs.readFileSync(file)).digest("hex")

/** Decompresses `file`, edits its text, compresses it again. */
const rewrite = (file: string, edit: (text: string) => string) =>
  Fs.writeFileSync(file, Zlib.gzipSync(edit(Zlib.gunzipSync(Fs.readFileSync(file)).toString("utf8"))))

describe("crm-relay db", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })((it) => {
    it.effect("a backup restores whole into an empty DATA_DIR (and, on PostgreSQL, into an empty database); every refusal is one sentence, exit code 2, target unchanged", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase.TestDatabase
        const dir = yield* tempDir("crm-relay-backup-cli-")
        const source = Path.join(dir, "source")
        yield* seedEmbedded(source)
        const env = { DATA_DIR: source, MASTER_KEY: Redacted.value(MASTER_KEY), LOG_LEVEL: "Warning" }
        const file = Path.join(dir, "nightly.crm-relay-backup")

        const made = yield* cli(["db", "backup", file], env)
        expect(made.code, made.stderr).toBe(0)
        // "It never contains the master key, and the command says so."
        expect(made.stdout).toContain(`It holds no master key: its secrets stay sealed (master key ${masterKeys.current.id})`)
        expect(made.stdout).toContain("keep your MASTER_KEY with it")
        const text = Zlib.gunzipSync(Fs.readFileSync(file)).toString("utf8")
        expect(text).not.toContain(Redacted.value(MASTER_KEY))
        expect(text).not.toContain("a-bridge-credential")

        // "a backup path that exists (no overwrite without --force)"
        const before = sha(file)
        const exists = yield* cli(["db", "backup", file], env)
        expect([exists.code, exists.stderr.trim()]).toEqual([2, `${file} exists: give another path, or --force to replace it.`])
        expect(sha(file)).toBe(before)
        expect((yield* cli(["db", "backup", file, "--force"], env)).code).toBe(0)

        const restoreInto = (target: string, extra: Record<string, string> = {}, backup = file) =>
          cli(["db", "restore", backup], { DATA_DIR: target, MASTER_KEY: Redacted.value(MASTER_KEY), LOG_LEVEL: "Warning", ...extra })
        const untouched = (target: string) => expect(Fs.existsSync(Path.join(target, "pglite"))).toBe(false)

        // "a damaged or truncated file": checked whole before anything is written.
        const truncated = Path.join(dir, "truncated")
        const bytes = Fs.readFileSync(file)
        Fs.writeFileSync(truncated, bytes.subarray(0, bytes.length - 40))
        const cut = yield* restoreInto(Path.join(dir, "t1"), {}, truncated)
        expect(cut.code).toBe(2)
        expect(cut.stderr.trim()).toMatch(/^\S+truncated is refused: The file is (damaged or cut short|cut short: it ends before its manifest)/)
        untouched(Path.join(dir, "t1"))

        // "a backup from a newer migration level than the build knows" (the manifest edited).
        const newer = Path.join(dir, "newer")
        Fs.copyFileSync(file, newer)
        const newest = Migrations.list().at(-1)!
        rewrite(newer, (t) =>
          t.replace(/"migration_level":\d+,"migrations":\[(.*?)\]\]/, (_, list) =>
            `"migration_level":999,"migrations":[${list}],[999,"from_a_newer_release"]]`))
        const future = yield* restoreInto(Path.join(dir, "t2"), {}, newer)
        expect([future.code, future.stderr.trim()]).toEqual([
          2,
          `The backup is at migration level 999, newer than this build knows (its newest is ${newest[0]}_${newest[1]}): restore it with crm-relay ${VERSION} or newer.`
        ])
        untouched(Path.join(dir, "t2"))

        // "a wrong MASTER_KEY ... detected and refused before any write".
        const wrong = yield* restoreInto(Path.join(dir, "t3"), { MASTER_KEY: Redacted.value(Vault.generateMasterKey()) })
        expect(wrong.code).toBe(2)
        expect(wrong.stderr.trim()).toMatch(/^The master key does not open the backup's secrets \(sealed under master key \S+, configured \S+\): set MASTER_KEY to the key the backup was made with\.$/)
        untouched(Path.join(dir, "t3"))

        // "a non-empty target": the source itself.
        const full = yield* restoreInto(source)
        expect([full.code, full.stderr.trim()]).toEqual([2, `${source} already holds an embedded database: restore into an empty DATA_DIR.`])
        expect(yield* accountCount(Database.layerPglite({ dataDir: source }))).toBe(1)

        // "a target URL that is not PostgreSQL or not reachable"
        const notPg = yield* cli(["db", "move", "--to", "mysql://root@127.0.0.1/crm"], env)
        expect([notPg.code, notPg.stderr.trim()]).toEqual([2, "The target must be a PostgreSQL URL, as postgres://user:password@host:5432/database."])
        const unreachable = yield* cli(["db", "move", "--to", "postgres://postgres@127.0.0.1:1/crm"], env)
        expect(unreachable.code).toBe(2)
        expect(unreachable.stderr.trim()).toMatch(/^PostgreSQL at 127\.0\.0\.1:1\/crm cannot be reached: .*\.$/)

        // Whole: into an empty DATA_DIR, then the restored database opens the sealed secret with the same key.
        const restoredDir = Path.join(dir, "restored")
        const restored = yield* restoreInto(restoredDir)
        expect(restored.code, restored.stderr).toBe(0)
        expect(restored.stdout).toMatch(/^Restored 5 rows of \d+ tables into .*, each table's rows and checksum verified\./)
        const secret = yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const vault = yield* Vault.make(masterKeys)
          const [row] = yield* sql<{ id: string }>`SELECT id FROM vault_secrets`
          return Redacted.value(yield* vault.open(row!.id, "refusals-owner"))
        }).pipe(Effect.provide(Database.layerPglite({ dataDir: restoredDir }).pipe(Layer.orDie)))
        expect(secret).toBe("a-bridge-credential")

        // "On PostgreSQL, the same command works against DATABASE_URL" (and refuses a database that is not empty).
        if (Option.isSome(db.url)) {
          const url = yield* freshPostgres(db.url.value)
          const intoPg = yield* cli(["db", "restore", file], { ...env, DATABASE_URL: url })
          expect(intoPg.code, intoPg.stderr).toBe(0)
          expect(yield* accountCount(Database.layerPostgres({ url: Redacted.make(url), poolSize: 1 }))).toBe(1)
          const again = yield* cli(["db", "restore", file], { ...env, DATABASE_URL: url })
          expect(again.code).toBe(2)
          expect(again.stderr.trim()).toMatch(/^The database at 127\.0\.0\.1:\d+\/crm_relay_data_\w+ is not empty \(it has \d+ tables\): give an empty database\.$/)
          expect(yield* accountCount(Database.layerPostgres({ url: Redacted.make(url), poolSize: 1 }))).toBe(1)
          // A backup taken from PostgreSQL restores into the embedded database.
          const fromPg = Path.join(dir, "from-postgres.crm-relay-backup")
          expect((yield* cli(["db", "backup", fromPg], { ...env, DATABASE_URL: url })).code).toBe(0)
          const back = yield* restoreInto(Path.join(dir, "from-pg"), {}, fromPg)
          expect(back.code, back.stderr).toBe(0)
        }
      }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)
  })
})
