/**
 * The operator's side of a queue table: how much work waits in it (`depth`),
 * queueing a stopped job again (`replay`) and waking its runners (`wake`),
 * and both bound once at Layer build (`controls`).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Clock, Effect } from "effect"
import { Notifier } from "../Notifier.js"
import type { JobTable } from "./Table.js"

/** How a replay went (`completed`: it had succeeded and the caller asked to keep such jobs). */
export type ReplayOutcome = "queued" | "already_pending" | "not_found" | "completed"

/** How much work waits in a queue table (see `depth`). */
export interface Depth {
  /** Pending rows (due, running or scheduled for later). */
  readonly pending: number
  /** Pending rows that are due now and held by no live lease. */
  readonly due: number
  /** Seconds since the oldest due row became due; 0 when none is. */
  readonly oldestDueSeconds: number
}

/** The depth of the queue table `table` now: one statement over its pending rows (the due index's rows). */
export const depth = (table: string): Effect.Effect<Depth, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = new Date(yield* Clock.currentTimeMillis)
    const rows = yield* sql<{ pending: number | string; due: number | string; oldest: Date | string | null }>`
      SELECT count(*) AS pending,
        count(*) FILTER (WHERE next_attempt_at <= ${at} AND (lease_expires_at IS NULL OR lease_expires_at <= ${at})) AS due,
        min(next_attempt_at) FILTER (WHERE next_attempt_at <= ${at} AND (lease_expires_at IS NULL OR lease_expires_at <= ${at})) AS oldest
      FROM ${sql(table)} WHERE status = 'pending'`.pipe(Effect.orDie)
    const row = rows[0]
    const oldest = row?.oldest === null || row?.oldest === undefined ? undefined : new Date(row.oldest)
    return {
      pending: Number(row?.pending ?? 0),
      due: Number(row?.due ?? 0),
      oldestDueSeconds: oldest === undefined ? 0 : Math.max(0, (at.getTime() - oldest.getTime()) / 1000)
    }
  })

/** What else a replay writes in the row it queues again. */
export interface ReplayExtras {
  /**
   * More assignments of the row's own columns, developer-written SQL (e.g.
   * sql`replays = replays + 1, finished_at = NULL`). They see the row as
   * it was (e.g. `attempts` before it is reset).
   */
  readonly assignments?: Statement.Fragment | undefined
  /** Leave a job in the completed status as it is (outcome `completed`). */
  readonly keepCompleted?: boolean | undefined
}

/**
 * The statement that queues the rows of `jobs` matching `where` again, due at
 * `at` with a fresh attempt count (no lease), with `assignments` of the
 * row's own columns (developer-written SQL; they see the row as it was). A
 * final attempt a row holds (see `FinalAttempt`) is kept as a row of the
 * table's `log` in the same statement, and the row's columns emptied, before
 * the next run can overwrite it. For `replay`, and for callers that queue
 * many rows at once.
 */
export const requeue = <A>(
  sql: SqlClient.SqlClient,
  jobs: JobTable<A>,
  where: Statement.Fragment,
  at: Date,
  assignments?: Statement.Fragment
) => {
  const more = assignments === undefined ? sql`` : sql`, ${assignments}`
  const update = (clear: Statement.Fragment) =>
    sql`UPDATE ${sql(jobs.table)} SET status = 'pending', attempts = 0, next_attempt_at = ${at},
      lease_owner = NULL, lease_expires_at = NULL ${clear} ${more} WHERE ${where}`
  const final = jobs.finalAttempt
  if (final === undefined || jobs.log === undefined) return update(sql``)
  // The CTE and the UPDATE both see the rows as they were.
  const columns = sql.csv(Object.keys(final.log).map((column) => sql`${sql(column)}`))
  return sql`WITH kept AS (
      INSERT INTO ${sql(jobs.log)} (${columns})
      SELECT ${sql.literal(Object.values(final.log).join(", "))} FROM ${sql(jobs.table)}
      WHERE ${where} AND ${sql(final.present)} IS NOT NULL
    ) ${update(sql`, ${sql.csv(final.columns.map((column) => sql`${sql(column)} = NULL`))}`)}`
}

/**
 * Queues a finished or failed job again, due now, with a fresh attempt count
 * (the row and its id stay the same). A pending job is left as it is. The
 * final attempt its row holds (see `FinalAttempt`) moves to the log first.
 */
export const replay = <A>(jobs: JobTable<A>, id: string, extras: ReplayExtras = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = new Date(yield* Clock.currentTimeMillis)
    const t = sql(jobs.table)
    const outcome = yield* sql.withTransaction(
      Effect.gen(function*() {
        const rows = yield* sql<{ status: string }>`SELECT status FROM ${t} WHERE id = ${id} FOR UPDATE`
        const status = rows[0]?.status
        if (status === undefined) return "not_found" as const
        if (status === "pending") return "already_pending" as const
        if (status === jobs.completedStatus && extras.keepCompleted === true) return "completed" as const
        yield* requeue(sql, jobs, sql`id = ${id}`, at, extras.assignments)
        return "queued" as const
      })
    ).pipe(Effect.orDie)
    if (outcome === "queued") yield* wake(jobs)
    return outcome satisfies ReplayOutcome
  }).pipe(Effect.withSpan("JobQueue.replay", { attributes: { table: jobs.table } }))

/**
 * Wakes the runners of `jobs` (all replicas). Inside a transaction the
 * notification is sent at COMMIT, so call it in the transaction that inserts jobs.
 */
export const wake = <A>(jobs: JobTable<A>): Effect.Effect<void, never, Notifier> =>
  Effect.flatMap(Notifier, (notifier) => Effect.orDie(notifier.notify(jobs.channel, "due")))

/** The operator's side of one queue table, bound to the database and notifier it was built with. */
export interface Controls {
  /** Wakes the table's runners (see `wake`). */
  readonly wake: Effect.Effect<void>
  /** Queues a finished or failed job again (see `replay`). */
  readonly replay: (id: string, extras?: ReplayExtras) => Effect.Effect<ReplayOutcome>
}

/**
 * `wake` and `replay` of `jobs` on this context's `SqlClient` and `Notifier`,
 * for a service to bind once at Layer build (whoever later calls it).
 */
export const controls = <A>(jobs: JobTable<A>): Effect.Effect<Controls, never, SqlClient.SqlClient | Notifier> =>
  Effect.map(Effect.context<SqlClient.SqlClient | Notifier>(), (context) => ({
    wake: Effect.provide(wake(jobs), context),
    replay: (id, extras) => Effect.provide(replay(jobs, id, extras), context)
  }))
