/**
 * Runs the migrations of `migrations/`: forward-only, each in its own
 * transaction, and safe when several replicas start at once.
 *
 * Every transaction first takes a transaction-scoped advisory lock keyed by
 * the current schema, then re-reads what is applied; a replica that waited
 * therefore skips what another one finished. (`@effect/sql`'s Migrator runs
 * all pending migrations in one transaction and creates its table outside
 * any lock, so two replicas can collide on a fresh database.) The error
 * type is the Migrator's `MigrationError`.
 */
import { MigrationError } from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, Option } from "effect"
import type { Migration } from "./Migration.js"
import { migrations as all } from "./migrations/index.js"

export { MigrationError } from "@effect/sql/Migrator"

/** The table recording applied migrations. */
export const TABLE = "crm_relay_migrations"

/** A migration id and name, e.g. `[1, "event_api"]`. */
export type Applied = readonly [id: number, name: string]

interface Resolved {
  readonly id: number
  readonly name: string
  readonly migration: Migration
}

/** `"0001_event_api"` → `[1, "event_api"]`, or undefined when the key is not `<id>_<name>`. */
const parseKey = (key: string): Applied | undefined => {
  const match = /^(\d+)_(.+)$/.exec(key)
  return match === null ? undefined : [Number(match[1]), match[2]!]
}

/** Id and name of every migration of `record` (all of ours by default), in order. */
export const list = (record: Readonly<Record<string, Migration>> = all): ReadonlyArray<Applied> =>
  Object.keys(record)
    .flatMap((key) => {
      const parsed = parseKey(key)
      return parsed === undefined ? [] : [parsed]
    })
    .sort((a, b) => a[0] - b[0])

const resolve = (record: Readonly<Record<string, Migration>>): Effect.Effect<ReadonlyArray<Resolved>, MigrationError> =>
  Effect.suspend(() => {
    const resolved: Array<Resolved> = []
    for (const [key, migration] of Object.entries(record)) {
      const parsed = parseKey(key)
      if (parsed === undefined) {
        return Effect.fail(new MigrationError({ reason: "bad-state", message: `Migration key "${key}" is not <id>_<name>.` }))
      }
      resolved.push({ id: parsed[0], name: parsed[1], migration })
    }
    resolved.sort((a, b) => a.id - b.id)
    if (new Set(resolved.map((r) => r.id)).size !== resolved.length) {
      return Effect.fail(new MigrationError({ reason: "duplicates", message: "Two migrations share an id." }))
    }
    return Effect.succeed(resolved)
  })

/**
 * True when every migration of `pending` is recorded under its name in
 * `found` (every start but the first: no lock, no transaction). False when
 * one is missing or named otherwise, or when the table could not be read
 * (the full run then applies, or refuses, with the lock held).
 */
const allRecorded = (found: Option.Option<ReadonlyArray<Recorded>>, pending: ReadonlyArray<Resolved>): boolean =>
  Option.match(found, {
    onNone: () => false,
    onSome: (rows) => {
      const names = new Map(rows.map((row) => [row.id, row.name]))
      return pending.every(({ id, name }) => names.get(id) === name)
    }
  })

/**
 * Applies every pending migration of `record` (all of ours by default) and
 * returns the ones this call applied.
 */
export const run = (
  record: Readonly<Record<string, Migration>> = all
): Effect.Effect<ReadonlyArray<Applied>, MigrationError | SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.flatMap(Effect.option(recorded(sql)), (found) => apply(sql, record, found)))
    .pipe(Effect.withSpan("Migrations.run"))

/** `run`, with the table already read (`found`; none when the read failed). */
const apply = (
  sql: SqlClient.SqlClient,
  record: Readonly<Record<string, Migration>>,
  found: Option.Option<ReadonlyArray<Recorded>>
): Effect.Effect<ReadonlyArray<Applied>, MigrationError | SqlError> =>
  Effect.gen(function*() {
    const pending = yield* resolve(record)
    if (allRecorded(found, pending)) return []
    const lock = sql`SELECT pg_advisory_xact_lock(hashtext(current_schema() || ${`.${TABLE}`}))`

    yield* sql.withTransaction(
      Effect.zipRight(
        lock,
        sql`CREATE TABLE IF NOT EXISTS ${sql(TABLE)} (
          id integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`
      )
    )

    const applied: Array<Applied> = []
    for (const { id, migration, name } of pending) {
      const ran = yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* lock
          const existing = yield* sql<{ name: string }>`SELECT name FROM ${sql(TABLE)} WHERE id = ${id}`
          if (existing.length > 0) {
            if (existing[0]!.name !== name) {
              return yield* new MigrationError({
                reason: "bad-state",
                message: `Migration ${id} is recorded as "${existing[0]!.name}", not "${name}".`
              })
            }
            return false
          }
          for (const statement of migration.statements) {
            yield* sql.unsafe(statement).pipe(
              Effect.mapError((cause) =>
                new MigrationError({
                  reason: "failed",
                  cause,
                  message: `Migration ${id}_${name} failed: ${cause.cause instanceof Error ? cause.cause.message : cause.message}`
                })
              )
            )
          }
          yield* sql`INSERT INTO ${sql(TABLE)} (id, name) VALUES (${id}, ${name})`
          return true
        })
      )
      if (ran) {
        applied.push([id, name])
        yield* Effect.logInfo("Applied migration").pipe(Effect.annotateLogs({ migration_id: id, migration_name: name }))
      }
    }
    return applied
  })

/** A migration recorded in the database, with when it was applied (ISO 8601). */
export interface Recorded {
  readonly id: number
  readonly name: string
  readonly applied_at: string
}

/** What the database holds against what this build knows. */
export interface Status {
  /** Recorded and known to this build. */
  readonly applied: ReadonlyArray<Recorded>
  /** Known to this build, not recorded yet: the next run applies them. */
  readonly pending: ReadonlyArray<{ readonly id: number; readonly name: string }>
  /** Recorded but unknown to this build: written by a newer release. */
  readonly unknown: ReadonlyArray<Recorded>
}

/** A migration as its file names it: `[1, "event_api"]` → `0001_event_api`. */
export const label = (id: number, name: string): string => `${String(id).padStart(4, "0")}_${name}`

/**
 * The database holds migrations this build does not know: a newer release
 * migrated it. Nothing may run on it (not even our own migrations).
 */
export class UnknownMigrations extends Data.TaggedError("UnknownMigrations")<{
  /** This build's newest migration. */
  readonly newestKnown: Applied
  /** The newest migration found that this build does not know. */
  readonly found: Recorded
}> {
  override get message() {
    const [id, name] = this.newestKnown
    return `The database was migrated by a newer release of crm-relay (it holds migration ${
      label(this.found.id, this.found.name)
    }, applied ${this.found.applied_at}; this build knows migrations up to ${
      label(id, name)
    }): run that newer release, or restore a backup made by this one with crm-relay db restore; nothing was changed.`
  }
}

/** The recorded migrations, oldest first; none when the table does not exist yet (a fresh database). */
const recorded = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<Recorded>, SqlError> =>
  Effect.gen(function*() {
    // Asked first, not tried: a failed statement would abort the transaction of a caller (a restore runs us in its own).
    const [table] = yield* sql<{ present: boolean }>`SELECT to_regclass(${TABLE}) IS NOT NULL AS present`
    if (table?.present !== true) return []
    const rows = yield* sql<{ id: number; name: string; applied_at: unknown }>`
      SELECT id, name, applied_at FROM ${sql(TABLE)} ORDER BY id`
    return rows.map((row) => ({
      id: Number(row.id),
      name: row.name,
      applied_at: row.applied_at instanceof Date ? row.applied_at.toISOString() : String(row.applied_at)
    }))
  })

/** Applied, pending and unknown migrations of the database against `record` (all of ours by default). Reads only. */
export const status = (
  record: Readonly<Record<string, Migration>> = all
): Effect.Effect<Status, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.map(recorded(sql), (found) => statusOf(found, record))).pipe(
    Effect.withSpan("Migrations.status")
  )

// The status of the recorded migrations `found` against `record`.
const statusOf = (found: ReadonlyArray<Recorded>, record: Readonly<Record<string, Migration>>): Status => {
  const known = list(record)
  const knownIds = new Set(known.map(([id]) => id))
  const foundIds = new Set(found.map((row) => row.id))
  return {
    applied: found.filter((row) => knownIds.has(row.id)),
    pending: known.filter(([id]) => !foundIds.has(id)).map(([id, name]) => ({ id, name })),
    unknown: found.filter((row) => !knownIds.has(row.id))
  }
}

/**
 * Fails with UnknownMigrations when the database holds a migration `record`
 * (all of ours by default) does not know. One read; writes nothing.
 */
export const refuseUnknown = (
  record: Readonly<Record<string, Migration>> = all
): Effect.Effect<void, UnknownMigrations | SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.flatMap(recorded(sql), (found) => refuseIn(found, record)))

/** Fails with UnknownMigrations when `found` (the recorded migrations) holds one `record` does not know. */
const refuseIn = (
  found: ReadonlyArray<Recorded>,
  record: Readonly<Record<string, Migration>>
): Effect.Effect<void, UnknownMigrations> => {
  const unknown = statusOf(found, record).unknown.at(-1)
  const newestKnown = list(record).at(-1)
  return unknown === undefined || newestKnown === undefined
    ? Effect.void
    : Effect.fail(new UnknownMigrations({ newestKnown, found: unknown }))
}

/**
 * `layer` with the guard of every process that opens the database: right
 * after it opens, before anything else is built on it, a database a newer
 * release migrated is refused (UnknownMigrations).
 */
export const guard = <A, E, R>(
  layer: Layer.Layer<A | SqlClient.SqlClient, E, R>
): Layer.Layer<A | SqlClient.SqlClient, E | UnknownMigrations | SqlError, R> =>
  Layer.tap(layer, (context) => refuseUnknown().pipe(Effect.provideService(SqlClient.SqlClient, Context.get(context, SqlClient.SqlClient))))

/**
 * Refuses a database a newer release migrated, then runs the migrations, when the Layer is built:
 * one read of the table serves both.
 */
export const layer: Layer.Layer<never, MigrationError | UnknownMigrations | SqlError, SqlClient.SqlClient> = Layer
  .effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const found = yield* recorded(sql)
      yield* refuseIn(found, all)
      yield* apply(sql, all, Option.some(found))
    }).pipe(Effect.withSpan("Migrations.run"))
  )
