import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { Catalog, Format, Load, Snapshot } from "../src/Backup/index.js"
import * as Migrations from "../src/Migrations.js"
import * as PgliteClient from "../src/PgliteClient.js"
import * as TestDatabase from "../src/TestDatabase.js"
import * as Vault from "../src/Vault.js"

const masterKey = () => Either.getOrThrow(Vault.parseMasterKey(Vault.generateMasterKey()))
const keys: Vault.MasterKeys = { current: masterKey(), previous: [] }

const tempFile = (name: string) => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-backup-")), name)

/** Accounts, keys, subscriptions, deliveries (some pending and leased), attempts and a sealed secret. */
const seed = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const vault = yield* Vault.make(keys)
  const [account] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES ('Backup Co', 'live') RETURNING id`
  const [key] = yield* sql<{ id: string }>`
    INSERT INTO integration_keys (account_id, secret_hash) VALUES (${account!.id}, sha256('k'::bytea)) RETURNING id`
  const [subscription] = yield* sql<{ id: string }>`
    INSERT INTO subscriptions (account_id, target_url, event, created_by_key_id)
    VALUES (${account!.id}, 'https://hooks.example/lead', 'lead', ${key!.id}) RETURNING id`
  yield* sql`
    INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, status, lease_owner, lease_expires_at)
    SELECT ${account!.id}, ${subscription!.id}, 'lead', 'call-' || n, 'https://hooks.example/lead',
      jsonb_build_object('n', n, 'note', 'ünïcode "quoted"\n'),
      CASE WHEN n % 4 = 0 THEN 'pending' ELSE 'delivered' END,
      CASE WHEN n % 8 = 0 THEN 'old-worker' END,
      CASE WHEN n % 8 = 0 THEN now() + interval '1 hour' END
    FROM generate_series(1, 2500) AS n`
  yield* sql.withTransaction(vault.store(Redacted.make("bridge-api-key"), "owner-1"))
  return { accountId: account!.id }
})

const counts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const out: Record<string, number> = {}
  for (const table of yield* Catalog.tables) {
    const [row] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${Snapshot.ident(table.name)}`)
    out[table.name] = Number(row!.n)
  }
  return out
})

const backupTo = (path: string) =>
  Effect.flatMap(TestDatabase.TestDatabase, (db) =>
    Format.writeFile(path, (writer) => Snapshot.dump(writer, { crmRelayVersion: "0.1.0", database: db.kind })))

/** A fresh, empty in-memory PGlite: the target of a restore. */
const emptyPglite = PgliteClient.layer({})

const rewrite = (path: string, edit: (text: string) => string) =>
  Fs.writeFileSync(path, Zlib.gzipSync(edit(Zlib.gunzipSync(Fs.readFileSync(path)).toString("utf8"))))

describe("Backup", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000 })((it) => {
    it.effect("a backup restores into an empty database with every row, its sequences and its secrets; leases are released", () =>
      Effect.gen(function*() {
        const { accountId } = yield* seed
        const before = yield* counts
        const path = tempFile("a.crm-relay-backup")
        const written = yield* backupTo(path)
        const checked = yield* Format.read(path)
        expect(checked).toEqual(written)
        expect(checked.migration_level).toBe(Migrations.list().at(-1)![0])
        expect(checked.master_key_ids).toEqual([keys.current.id])
        // The file holds the sealed secret, never the plaintext nor the master key.
        const text = Zlib.gunzipSync(Fs.readFileSync(path)).toString("utf8")
        expect(text).not.toContain("bridge-api-key")
        expect(text).not.toContain(Buffer.from(Redacted.value(keys.current.bytes)).toString("base64"))

        const sealed: Load.Sealed = { wraps: [], secret: undefined }
        yield* Format.read(path, Load.collectSealed(sealed))
        yield* Load.checkKeys(sealed, keys, checked)
        const wrong = yield* Effect.flip(Load.checkKeys(sealed, { current: masterKey(), previous: [] }, checked))
        expect(wrong.message).toMatch(/^The master key does not open the backup's secrets/)

        const restored = yield* Effect.gen(function*() {
          yield* Load.load(path, checked)
          const sql = yield* SqlClient.SqlClient
          const leased = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE lease_owner IS NOT NULL`
          const pending = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'`
          // A new row continues the identity sequence past the restored ones.
          const [next] = yield* sql<{ seq: number }>`
            INSERT INTO accounts (name, mode) VALUES ('After', 'live') RETURNING seq`
          const [max] = yield* sql<{ seq: number }>`SELECT max(seq)::int AS seq FROM accounts WHERE id = ${accountId}`
          const secret = yield* Effect.flatMap(Vault.make(keys), (vault) =>
            Effect.flatMap(sql<{ id: string }>`SELECT id FROM vault_secrets`, ([row]) => vault.open(row!.id, "owner-1")))
          return {
            counts: { ...(yield* counts), accounts: (yield* counts).accounts! - 1 },
            leased: leased[0]!.n,
            pending: pending[0]!.n,
            nextAfterMax: Number(next!.seq) > Number(max!.seq),
            secret: Redacted.value(secret)
          }
        }).pipe(Effect.provide(emptyPglite))
        expect(restored).toEqual({ counts: before, leased: 0, pending: 625, nextAfterMax: true, secret: "bridge-api-key" })
      }))

    it.effect("a damaged, cut-short or newer backup is refused whole, with one sentence", () =>
      Effect.gen(function*() {
        const path = tempFile("b.crm-relay-backup")
        yield* backupTo(path)
        const manifest = yield* Format.read(path)

        const cut = tempFile("cut")
        const bytes = Fs.readFileSync(path)
        Fs.writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length / 2)))
        expect((yield* Effect.flip(Format.read(cut))).message).toMatch(/^The file is damaged or cut short/)

        const edited = tempFile("edited")
        Fs.copyFileSync(path, edited)
        rewrite(edited, (text) => text.replace("call-17", "call-71"))
        expect((yield* Effect.flip(Format.read(edited))).message).toBe(
          "The file is damaged: the rows of deliveries do not match the manifest's checksum."
        )

        const noManifest = tempFile("no-manifest")
        Fs.copyFileSync(path, noManifest)
        rewrite(noManifest, (text) => text.slice(0, text.indexOf("@manifest ")))
        expect((yield* Effect.flip(Format.read(noManifest))).message).toBe("The file is cut short: it ends before its manifest.")

        const newer = { ...manifest, migration_level: 999, migrations: [...manifest.migrations, [999, "from_the_future"] as const] }
        expect(Option.getOrThrow(Load.incompatibility(newer))).toMatch(/^The backup is at migration level 999, newer than this build knows/)
        expect(Load.incompatibility(manifest)).toEqual(Option.none())
      }))
  })

  it.effect("an empty database backs up and restores (no sealed secret to check)", () =>
    Effect.gen(function*() {
      const path = tempFile("empty.crm-relay-backup")
      const manifest = yield* Format.writeFile(path, (writer) =>
        Effect.zipRight(Migrations.run(), Snapshot.dump(writer, { crmRelayVersion: "0.1.0", database: "pglite" }))
      ).pipe(Effect.provide(emptyPglite))
      expect(manifest.parts.every((part) => part.rows === 0)).toBe(true)
      const sealed: Load.Sealed = { wraps: [], secret: undefined }
      yield* Format.read(path, Load.collectSealed(sealed))
      yield* Load.checkKeys(sealed, keys, manifest)
      const tables = yield* Effect.zipRight(Load.load(path, manifest), Catalog.tableCount).pipe(Effect.provide(emptyPglite))
      expect(tables).toBeGreaterThan(10)
    }), { timeout: 120_000 })
})

