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
import { Effect, Layer } from "effect"
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
 * True when every migration of `pending` is recorded under its name: one
 * read, no lock, no transaction (every start but the first). False when
 * one is missing or named otherwise, or when the table does not exist yet
 * (the full run then applies, or refuses, with the lock held).
 */
const allRecorded = (sql: SqlClient.SqlClient, pending: ReadonlyArray<Resolved>): Effect.Effect<boolean> =>
  // Asked first, not tried: a failed statement would abort the transaction of a caller (a restore runs us in its own).
  sql<{ found: boolean }>`SELECT to_regclass(${TABLE}) IS NOT NULL AS found`.pipe(
    Effect.flatMap(([row]) =>
      row?.found === true ? sql<{ id: number; name: string }>`SELECT id, name FROM ${sql(TABLE)}` : Effect.succeed([])
    ),
    Effect.map((rows) => {
      const recorded = new Map(rows.map((row) => [Number(row.id), row.name]))
      return pending.every(({ id, name }) => recorded.get(id) === name)
    }),
    Effect.orElseSucceed(() => false)
  )

/**
 * Applies every pending migration of `record` (all of ours by default) and
 * returns the ones this call applied.
 */
export const run = (
  record: Readonly<Record<string, Migration>> = all
): Effect.Effect<ReadonlyArray<Applied>, MigrationError | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pending = yield* resolve(record)
    if (yield* allRecorded(sql, pending)) return []
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
  }).pipe(Effect.withSpan("Migrations.run"))

/** Runs the migrations when the Layer is built. */
export const layer: Layer.Layer<never, MigrationError | SqlError, SqlClient.SqlClient> = Layer.effectDiscard(run())
