/**
 * Loads a checked backup into an empty database, in ONE transaction: the
 * schema is migrated to the backup's level, every part is inserted, each
 * table is read back and compared with the manifest (rows and checksum),
 * identity sequences are set past the restored values, leases held by the
 * old process are released, and the schema is migrated on to this build's
 * level. A failure anywhere rolls all of it back.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Data, Effect, Either, Option } from "effect"
import type { Migration } from "../Migration.js"
import * as Migrations from "../Migrations.js"
import { migrations as all } from "../migrations/index.js"
import * as Vault from "../Vault.js"
import * as Catalog from "./Catalog.js"
import * as Format from "./Format.js"
import { ident } from "./Snapshot.js"

/** The backup cannot go into this build's database; `message` is one sentence. */
export class BackupRefused extends Data.TaggedError("BackupRefused")<{ readonly message: string }> {}

/** Why this build cannot restore `manifest` (a newer or foreign migration history), or none. */
export const incompatibility = (manifest: Format.Manifest): Option.Option<string> => {
  const known = new Map(Migrations.list())
  const newest = Migrations.list().at(-1)
  for (const [id, name] of manifest.migrations) {
    if (!known.has(id)) {
      return Option.some(
        `The backup is at migration level ${manifest.migration_level}, newer than this build knows (its newest is ${
          newest?.[0] ?? 0
        }_${newest?.[1] ?? "none"}): restore it with crm-relay ${manifest.crm_relay_version} or newer.`
      )
    }
    if (known.get(id) !== name) {
      return Option.some(`The backup's migration ${id} is "${name}", not "${known.get(id)}": it was made by another product's build.`)
    }
  }
  if (manifest.migrations.at(-1)?.[0] !== manifest.migration_level && manifest.migrations.length > 0) {
    return Option.some(`The backup's manifest names level ${manifest.migration_level} but lists migrations up to ${manifest.migrations.at(-1)?.[0]}.`)
  }
  return Option.none()
}

/** The sealed rows a master key is checked against: every data key's wraps and one secret. */
export interface Sealed {
  readonly wraps: Array<{ key_id: string; master_key_id: string; wrapped: Uint8Array }>
  secret: { key_id: string; aad: string; ciphertext: Uint8Array } | undefined
}

const bytea = (text: string): Uint8Array => Buffer.from(text.startsWith("\\x") ? text.slice(2) : text, "hex")

/** Collects what `checkKeys` needs while the file is read (an `onRows` of Format.read). */
export const collectSealed = (into: Sealed): Format.OnRows<never> => (table, lines) =>
  Effect.sync(() => {
    if (table === "vault_key_wraps") {
      for (const line of lines) {
        const row = JSON.parse(line) as { key_id: string; master_key_id: string; wrapped: string }
        into.wraps.push({ key_id: row.key_id, master_key_id: row.master_key_id, wrapped: bytea(row.wrapped) })
      }
    }
    if (table === "vault_secrets" && into.secret === undefined && lines[0] !== undefined) {
      const row = JSON.parse(lines[0]) as { key_id: string; aad: string; ciphertext: string }
      into.secret = { key_id: row.key_id, aad: row.aad, ciphertext: bytea(row.ciphertext) }
    }
  })

/** Fails unless `keys` open one sealed secret of the backup (nothing sealed: nothing to check). */
export const checkKeys = (sealed: Sealed, keys: Vault.MasterKeys, manifest: Format.Manifest) =>
  sealed.secret === undefined
    ? Effect.void
    : Either.match(Vault.opens(keys, sealed.wraps, sealed.secret), {
      onRight: () => Effect.void,
      onLeft: () =>
        Effect.fail(
          new BackupRefused({
            message: `The master key does not open the backup's secrets (sealed under master key ${
              manifest.master_key_ids.join(", ")
            }, configured ${keys.current.id}): set MASTER_KEY to the key the backup was made with.`
          })
        )
    })

/** Our migrations up to `level`. */
const upTo = (level: number): Record<string, Migration> =>
  Object.fromEntries(Object.entries(all).filter(([key]) => Number(key.split("_")[0]) <= level))

/** Rows inserted per statement. */
const insertInto = (sql: SqlClient.SqlClient, table: Catalog.Table) => {
  const columns = table.insertable.map(ident).join(", ")
  const overriding = table.identity.length > 0 ? " OVERRIDING SYSTEM VALUE" : ""
  const text = `INSERT INTO ${ident(table.name)} (${columns})${overriding}
    SELECT ${columns} FROM jsonb_populate_recordset(NULL::${ident(table.name)}, $1::text::jsonb)`
  return (lines: ReadonlyArray<string>) => sql.unsafe(text, [`[${lines.join(",")}]`])
}

/** The rows and checksum of `table` as the database holds it, read as a backup writes it. */
const digest = (sql: SqlClient.SqlClient, table: Catalog.Table) =>
  Effect.gen(function*() {
    const rows = new Format.RowsDigest()
    yield* sql.unsafe(`DECLARE crm_relay_verify NO SCROLL CURSOR FOR SELECT to_jsonb(t)::text AS r FROM ${ident(table.name)} t`)
    while (true) {
      const chunk = yield* sql.unsafe<{ r: string }>("FETCH 2000 FROM crm_relay_verify")
      for (const row of chunk) rows.add(row.r)
      if (chunk.length < 2000) break
    }
    yield* sql.unsafe("CLOSE crm_relay_verify")
    return { rows: rows.rows, sha256: rows.hex() }
  })

/**
 * Loads the backup at `path` (already read once by `Format.read`, which gave
 * `manifest`) into the empty database of the context. `onRows` hears each
 * inserted batch's size.
 */
export const load = (
  path: string,
  manifest: Format.Manifest,
  onRows: (rows: number) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET LOCAL TimeZone TO 'UTC'`
      yield* Migrations.run(upTo(manifest.migration_level))
      const tables = new Map((yield* Catalog.tables).map((table) => [table.name, table]))
      const unknown = manifest.parts.find((part) => !tables.has(part.table))
      if (unknown !== undefined) {
        return yield* new BackupRefused({ message: `The backup has a table this build does not know at its level: ${unknown.table}.` })
      }
      const inserts = new Map([...tables.values()].map((table) => [table.name, insertInto(sql, table)]))
      yield* Format.read(path, (table, lines) => Effect.zipRight(inserts.get(table)!(lines), onRows(lines.length)))
      for (const part of manifest.parts) {
        const table = tables.get(part.table)!
        const found = yield* digest(sql, table)
        if (found.rows !== part.rows || found.sha256 !== part.sha256) {
          return yield* new BackupRefused({
            message: `After loading, ${part.table} holds ${found.rows} rows whose checksum differs from the backup's ${part.rows}: nothing was kept.`
          })
        }
        for (const column of table.identity) {
          yield* sql.unsafe(
            `SELECT setval(pg_get_serial_sequence($1, $2), coalesce((SELECT max(${ident(column)}) FROM ${ident(table.name)}), 0) + 1, false)`,
            [table.name, column]
          )
        }
        // The process that held these leases is not the one that will serve this database.
        if (table.insertable.includes("lease_owner") && table.insertable.includes("lease_expires_at")) {
          yield* sql.unsafe(
            `UPDATE ${ident(table.name)} SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner IS NOT NULL`
          )
        }
      }
      return yield* Migrations.run()
    }))
  }).pipe(Effect.withSpan("Backup.load"))
