/**
 * Writes a consistent snapshot of the database into a backup Writer.
 *
 * PostgreSQL: one REPEATABLE READ, READ ONLY transaction on its own pool
 * connection, read through a cursor per table; the other connections go on
 * serving.
 *
 * Embedded PGlite is one session: a transaction held for the whole dump
 * would stop intake for as long. So the snapshot is taken in one short
 * transaction that copies every table into a temporary table of the session
 * (`CREATE TEMP TABLE … AS TABLE …`, inside the engine, no rows cross into
 * JavaScript), and the copies are then read a few pages at a time, each its
 * own turn on the session, between the server's own statements. Rows come
 * in storage order: the manifest's checksums do not depend on it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as Catalog from "./Catalog.js"
import type { Manifest, Writer } from "./Format.js"

/** Rows read per cursor FETCH on PostgreSQL. */
const CHUNK = 1000

/** A quoted SQL identifier. */
export const ident = (name: string): string => `"${name.replaceAll("\"", "\"\"")}"`

/** What the manifest says beyond the parts: supplied by the caller (version) and read here. */
export interface About {
  readonly crmRelayVersion: string
  readonly database: "postgres" | "pglite"
}

const masterKeyIds = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ id: string }>`SELECT DISTINCT master_key_id AS id FROM vault_key_wraps ORDER BY 1`.pipe(
    Effect.map((rows) => rows.map((row) => row.id)),
    // A database from before the vault existed has no wraps to name.
    Effect.orElseSucceed(() => [] as Array<string>)
  ))

const manifestOf = (about: About) =>
  Effect.gen(function*() {
    const migrations = yield* Catalog.migrations
    return {
      crm_relay_version: about.crmRelayVersion,
      migration_level: migrations.at(-1)?.[0] ?? 0,
      migrations,
      database: about.database,
      created_at: new Date().toISOString(),
      master_key_ids: yield* masterKeyIds
    } satisfies Omit<Manifest, "parts">
  })

/** PostgreSQL: every table through a cursor of one repeatable-read transaction. */
const dumpPostgres = (writer: Writer, about: About, onRows: (rows: number) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
      yield* sql`SET LOCAL TimeZone TO 'UTC'`
      const tables = yield* Catalog.tables
      const manifest = yield* manifestOf(about)
      for (const table of tables) {
        yield* writer.part(table.name)
        yield* sql.unsafe(`DECLARE crm_relay_backup NO SCROLL CURSOR FOR SELECT to_jsonb(t)::text AS r FROM ${ident(table.name)} t`)
        while (true) {
          const rows = yield* sql.unsafe<{ r: string }>(`FETCH ${CHUNK} FROM crm_relay_backup`)
          yield* writer.rows(rows.map((row) => row.r))
          yield* onRows(rows.length)
          if (rows.length < CHUNK) break
        }
        yield* sql.unsafe("CLOSE crm_relay_backup")
      }
      return yield* writer.finish(manifest)
    }))
  })

/**
 * How long a turn on the PGlite session aims to be: the wait it adds to a
 * statement that arrives during it. Pages per turn (8 KiB each) follow the
 * last turn's time, from 1 to `MAX_PAGES`: rows differ in width, and the
 * same pages take longer on a busy machine.
 */
const TURN_MS = 4
const MAX_PAGES = 32
const nextPages = (pages: number, tookMs: number): number =>
  tookMs > TURN_MS ? Math.max(1, pages >> 1) : tookMs < TURN_MS / 2 ? Math.min(MAX_PAGES, pages * 2) : pages

/**
 * Between two turns on the PGlite session: a pause of one timer tick, so the
 * statements that waited for the session during the last turn take it before
 * the next turn asks again (the session's permit is not a queue: a fiber that
 * asks again at once takes it back before the waiters wake). A host timer,
 * not the Clock: a pause of the event loop, whatever clock the caller runs.
 */
const giveWay = Effect.async<void>((resume) => {
  const timer = setTimeout(() => resume(Effect.void), 1)
  return Effect.sync(() => clearTimeout(timer))
})

/**
 * PGlite: copy every table in one short transaction (a plain copy: no sort,
 * no index), then read the copies in turns of a few pages each, by their
 * rows' physical position (a TID range scan), so no turn is long.
 */
const dumpPglite = (writer: Writer, about: About, onRows: (rows: number) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = `crm_relay_backup_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e9).toString(36)}`
    const copies: Array<string> = []
    yield* Effect.addFinalizer(() =>
      Effect.forEach(copies, (copy) => sql.unsafe(`DROP TABLE IF EXISTS ${ident(copy)}`), { discard: true }).pipe(Effect.ignore)
    )
    const { manifest, tables } = yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
      const tables = yield* Catalog.tables
      const manifest = yield* manifestOf(about)
      for (const [i, table] of tables.entries()) {
        const copy = `${prefix}_${i}`
        copies.push(copy)
        yield* sql.unsafe(`CREATE TEMP TABLE ${ident(copy)} AS TABLE ${ident(table.name)}`)
      }
      return { manifest, tables }
    }))
    for (const [i, table] of tables.entries()) {
      const copy = ident(copies[i]!)
      yield* writer.part(table.name)
      const [size] = yield* sql.unsafe<{ pages: number }>(
        `SELECT (pg_relation_size('${copy}'::regclass) / current_setting('block_size')::int)::int AS pages`
      )
      const total = Number(size?.pages ?? 0)
      let pages = 1
      for (let page = 0; page < total;) {
        yield* giveWay
        const start = performance.now()
        const rows = yield* sql.withTransaction(Effect.zipRight(
          sql`SET LOCAL TimeZone TO 'UTC'`,
          sql.unsafe<{ r: string }>(
            `SELECT to_jsonb(b)::text AS r FROM ${copy} b WHERE ctid >= '(${page},0)'::tid AND ctid < '(${page + pages},0)'::tid`
          )
        ))
        page += pages
        pages = nextPages(pages, performance.now() - start)
        yield* writer.rows(rows.map((row) => row.r))
        yield* onRows(rows.length)
      }
      yield* sql.unsafe(`DROP TABLE ${copy}`)
    }
    return yield* writer.finish(manifest)
  }).pipe(Effect.scoped)

/**
 * Dumps the database of the context into `writer` and returns the manifest
 * written last. `onRows` hears how many rows each chunk carried.
 */
export const dump = (
  writer: Writer,
  about: About,
  onRows: (rows: number) => Effect.Effect<void> = () => Effect.void
) =>
  (about.database === "postgres" ? dumpPostgres(writer, about, onRows) : dumpPglite(writer, about, onRows)).pipe(
    Effect.withSpan("Backup.dump")
  )

/** Rows per table, for a progress total (read outside the snapshot: an estimate). */
export const rowCounts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* Catalog.tables
  let total = 0
  for (const table of tables) {
    const rows = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${ident(table.name)}`)
    total += Number(rows[0]?.n ?? 0)
  }
  return total
})
