/**
 * Retention: finished rows are deleted after a period, oldest first, in small
 * batches, so pruning never holds locks or I/O long enough to slow the job
 * queues' claims.
 *
 * - Webhook deliveries that are no longer pending (delivered, failed, ended)
 *   and created before `now - period` are deleted with their attempt rows.
 * - Events (store migration 0017) whose fan-out finished, created before
 *   `now - period`, are deleted once none of their deliveries is left.
 * - CRM push jobs that are no longer pending, last changed before
 *   `now - period`, are deleted with their receipts (the call outcome stays:
 *   it keeps a call id from being queued twice).
 * - Delivery payloads may be dropped sooner (`payloadPeriod`, for privacy):
 *   the row stays for the operator, its payload becomes NULL; such a
 *   delivery can no longer be replayed. An event's payload (which its
 *   deliveries send) is dropped likewise once none of them is pending.
 *
 * Each batch is one statement over an index (`FOR UPDATE SKIP LOCKED`: a row
 * a replay is changing is left for the next round); a short pause between
 * batches leaves the database to the workers. Deliveries are found through
 * the index every delivery already has, `(account_id, created_at)`, one
 * account after another (store migration 0023): an index of finished
 * deliveries alone cost an entry, and its WAL, per delivery finished.
 * Rows pruned and the age of the oldest finished row kept are metrics.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Clock, Data, Duration, Effect, Metric } from "effect"

/** How long finished rows are kept, and how pruning paces itself. */
export interface RetentionPolicy {
  /** Finished rows older than this are deleted. Default 30 days. */
  readonly period: Duration.Duration
  /** Delivery payloads older than this are dropped (at most `period`). Default: `period`. */
  readonly payloadPeriod: Duration.Duration
  /** Rows per batch (one statement). Default 500. */
  readonly batchSize: number
  /** Pause between two batches. Default 100 ms. */
  readonly pause: Duration.Duration
  /** Pause between two rounds (a round prunes until nothing is left to prune). Default 1 minute. */
  readonly interval: Duration.Duration
}

/** The defaults: 30 days, payloads as long as their rows, 500 rows a batch. */
export const DEFAULT_POLICY: RetentionPolicy = {
  period: Duration.days(30),
  payloadPeriod: Duration.days(30),
  batchSize: 500,
  pause: Duration.millis(100),
  interval: Duration.minutes(1)
}

/** A retention setting that cannot be used; nothing was pruned. */
export class InvalidRetention extends Data.TaggedError("InvalidRetention")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

/** Checks `policy`: positive periods, payloads kept no longer than rows, a batch of 1 to 10000 rows. */
export const validate = (policy: RetentionPolicy): Effect.Effect<RetentionPolicy, InvalidRetention> => {
  const fail = (reason: string) => Effect.fail(new InvalidRetention({ reason }))
  if (!Duration.isFinite(policy.period) || Duration.toMillis(policy.period) <= 0) {
    return fail("The retention period must be a positive duration, e.g. \"30 days\".")
  }
  if (!Duration.isFinite(policy.payloadPeriod) || Duration.toMillis(policy.payloadPeriod) <= 0) {
    return fail("The payload retention period must be a positive duration, e.g. \"7 days\".")
  }
  if (Duration.greaterThan(policy.payloadPeriod, policy.period)) {
    return fail("The payload retention period cannot be longer than the retention period (payloads go with their rows).")
  }
  if (!Number.isInteger(policy.batchSize) || policy.batchSize < 1 || policy.batchSize > 10_000) {
    return fail("The retention batch size must be a whole number from 1 to 10000.")
  }
  return Effect.succeed(policy)
}

/** The tables retention deletes rows of: the `table` label's values of `prunedRows`. */
export const PRUNED_TABLES = ["deliveries", "delivery_attempts", "events", "crm_push_jobs", "crm_push_receipts"] as const
/** A table retention deletes rows of. */
export type PrunedTable = typeof PRUNED_TABLES[number]
/** The tables whose oldest kept row retention reports: the `table` label's values of `oldestKept`. */
export const KEPT_TABLES = ["deliveries", "events", "crm_push_jobs"] as const
/** A table whose oldest kept row retention reports. */
export type KeptTable = typeof KEPT_TABLES[number]

/** One kind of finished row and the rows that reference it. */
interface Pruned {
  /** The `table` label of the metrics. */
  readonly table: KeptTable
  /** Deletes one batch of rows finished before `cutoff`; answers rows deleted by table. */
  readonly batch: (sql: SqlClient.SqlClient, cutoff: Date, limit: number) => Effect.Effect<Partial<Record<PrunedTable, number>>, unknown>
  /** The time the oldest finished row kept was created (or last changed), if any. */
  readonly oldest: (sql: SqlClient.SqlClient) => Effect.Effect<Date | null, unknown>
}

const counted = (rows: ReadonlyArray<Record<string, unknown>>, parent: PrunedTable, child: PrunedTable): Partial<Record<PrunedTable, number>> => ({
  [parent]: Number(rows[0]?.["parents"] ?? 0),
  [child]: Number(rows[0]?.["children"] ?? 0)
})

/**
 * Finished rows of `table` and the rows of `child` that reference them
 * through `childKey`. `doomed` defines the CTE `doomed` (and any it needs):
 * the ids of one batch of finished rows older than `cutoff`, locked. The
 * children go first in the same statement (their foreign keys are checked at
 * its end).
 */
const withChildren = (spec: {
  readonly table: KeptTable
  readonly child: PrunedTable
  readonly childKey: string
  readonly doomed: (sql: SqlClient.SqlClient, cutoff: Date, limit: number) => Statement.Fragment
  readonly oldest: Pruned["oldest"]
}): Pruned => ({
  table: spec.table,
  batch: (sql, cutoff, limit) =>
    sql`WITH RECURSIVE ${spec.doomed(sql, cutoff, limit)}, children AS (
        DELETE FROM ${sql(spec.child)} WHERE ${sql(spec.childKey)} IN (SELECT id FROM doomed) RETURNING 1
      ), parents AS (
        DELETE FROM ${sql(spec.table)} WHERE id IN (SELECT id FROM doomed) RETURNING 1
      )
      SELECT (SELECT count(*) FROM parents) AS parents, (SELECT count(*) FROM children) AS children`.pipe(
      Effect.map((rows) => counted(rows, spec.table, spec.child))
    ),
  oldest: spec.oldest
})

// The accounts that have deliveries: a walk over deliveries_account_latest_idx, one probe per account.
const owners = (sql: SqlClient.SqlClient) =>
  sql`owners AS (
      (SELECT account_id FROM deliveries ORDER BY account_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.account_id FROM deliveries AS d WHERE d.account_id > owners.account_id ORDER BY d.account_id LIMIT 1)
      FROM owners WHERE owners.account_id IS NOT NULL
    )`

// Each account's oldest finished deliveries, account after account, through (account_id, created_at).
const deliveries = withChildren({
  table: "deliveries",
  child: "delivery_attempts",
  childKey: "delivery_id",
  doomed: (sql, cutoff, limit) =>
    sql`${owners(sql)}, doomed AS (
        SELECT old.id FROM owners CROSS JOIN LATERAL (
          SELECT d.id FROM deliveries AS d
          WHERE d.account_id = owners.account_id AND d.created_at < ${cutoff} AND d.status <> 'pending'
          ORDER BY d.created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
        ) AS old
        WHERE owners.account_id IS NOT NULL
        LIMIT ${limit}
      )`,
  oldest: (sql) =>
    sql<{ at: Date | null }>`WITH RECURSIVE ${owners(sql)}
      SELECT min(first.created_at) AS at FROM owners CROSS JOIN LATERAL (
        SELECT d.created_at FROM deliveries AS d WHERE d.account_id = owners.account_id AND d.status <> 'pending'
        ORDER BY d.created_at LIMIT 1
      ) AS first
      WHERE owners.account_id IS NOT NULL`.pipe(Effect.map((rows) => rows[0]?.at ?? null))
})

// An event goes once its deliveries went (they are pruned first, by the same age).
const events: Pruned = {
  table: "events",
  batch: (sql, cutoff, limit) =>
    sql`WITH doomed AS (
        SELECT e.id FROM events AS e WHERE e.status <> 'pending' AND e.created_at < ${cutoff}
          AND NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.event_id = e.id)
        ORDER BY e.created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      ), gone AS (
        DELETE FROM events WHERE id IN (SELECT id FROM doomed) RETURNING 1
      )
      SELECT count(*) AS n FROM gone`.pipe(Effect.map((rows) => ({ events: Number(rows[0]?.["n"] ?? 0) }))),
  oldest: (sql) =>
    sql<{ at: Date | null }>`SELECT min(created_at) AS at FROM events WHERE status <> 'pending'`.pipe(
      Effect.map((rows) => rows[0]?.at ?? null)
    )
}

const pushJobs = withChildren({
  table: "crm_push_jobs",
  child: "crm_push_receipts",
  childKey: "job_id",
  doomed: (sql, cutoff, limit) =>
    sql`doomed AS (
        SELECT id FROM crm_push_jobs WHERE status <> 'pending' AND updated_at < ${cutoff}
        ORDER BY updated_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      )`,
  oldest: (sql) =>
    sql<{ at: Date | null }>`SELECT min(updated_at) AS at FROM crm_push_jobs WHERE status <> 'pending'`.pipe(
      Effect.map((rows) => rows[0]?.at ?? null)
    )
})

const dropPayloads = (sql: SqlClient.SqlClient, cutoff: Date, limit: number, at: Date) =>
  sql`UPDATE deliveries SET payload = NULL, payload_dropped_at = ${at} WHERE id IN (
      SELECT id FROM deliveries WHERE status <> 'pending' AND payload IS NOT NULL AND created_at < ${cutoff}
      ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ) RETURNING 1`.pipe(Effect.map((rows) => rows.length))

// An event's payload is what its deliveries send: dropped once none of them is pending.
const dropEventPayloads = (sql: SqlClient.SqlClient, cutoff: Date, limit: number, at: Date) =>
  sql`UPDATE events SET payload = NULL, payload_dropped_at = ${at} WHERE id IN (
      SELECT e.id FROM events AS e WHERE e.status <> 'pending' AND e.payload IS NOT NULL AND e.created_at < ${cutoff}
        AND NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.event_id = e.id AND d.status = 'pending')
      ORDER BY e.created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ) RETURNING 1`.pipe(Effect.map((rows) => rows.length))

/** Rows deleted by retention, by table (metric). */
export const prunedRows = Metric.counter("crm_relay_retention_pruned_rows_total", {
  description: "Finished rows deleted by retention, by table (deliveries, delivery_attempts, events, crm_push_jobs, crm_push_receipts).",
  incremental: true
})
/** The pruned-rows counter of each table of `PRUNED_TABLES`: the only series it has, each exported from the start. */
export const prunedRowsByTable = Object.fromEntries(
  PRUNED_TABLES.map((table) => [table, Metric.tagged(prunedRows, "table", table)])
) as { readonly [T in PrunedTable]: Metric.Metric.Counter<number> }
/** Delivery payloads dropped before their rows (metric): a delivery's own, or an event's that its deliveries send. */
export const droppedPayloads = Metric.counter("crm_relay_retention_dropped_payloads_total", {
  description: "Delivery payloads dropped by retention before their rows (RETENTION_PAYLOAD_PERIOD): a delivery's own, or an event's.",
  incremental: true
})
/** Age of the oldest finished row kept, by table (metric). */
export const oldestKept = Metric.gauge("crm_relay_retention_oldest_row_age_seconds", {
  description: "Age in seconds of the oldest finished row kept, by table (deliveries and events: created, crm_push_jobs: last changed); 0 when none."
})
/** The oldest-row gauge of each table of `KEPT_TABLES`: the only series it has, each exported from the start. */
export const oldestKeptByTable = Object.fromEntries(
  KEPT_TABLES.map((table) => [table, Metric.tagged(oldestKept, "table", table)])
) as { readonly [T in KeptTable]: Metric.Metric.Gauge<number> }

/** What one round did. */
export interface RoundResult {
  /** Rows deleted, by table. */
  readonly pruned: Readonly<Partial<Record<PrunedTable, number>>>
  readonly payloadsDropped: number
  /** Batches run (statements that deleted or dropped something, and the last empty one of each kind). */
  readonly batches: number
}

/**
 * One round: prunes batch after batch until no finished row older than the
 * period is left, then drops the old payloads the same way, and refreshes
 * the oldest-row gauges.
 */
export const round = (policy: RetentionPolicy): Effect.Effect<RoundResult, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const cutoff = new Date(now - Duration.toMillis(policy.period))
    const payloadCutoff = new Date(now - Duration.toMillis(policy.payloadPeriod))
    const pruned: Partial<Record<PrunedTable, number>> = {}
    let batches = 0
    for (const kind of [deliveries, events, pushJobs]) {
      for (;;) {
        const deleted = yield* kind.batch(sql, cutoff, policy.batchSize)
        batches++
        for (const table of PRUNED_TABLES) {
          const n = deleted[table]
          if (n === undefined) continue
          pruned[table] = (pruned[table] ?? 0) + n
          if (n > 0) yield* Metric.incrementBy(prunedRowsByTable[table], n)
        }
        if ((deleted[kind.table] ?? 0) < policy.batchSize) break
        yield* Effect.sleep(policy.pause)
      }
    }
    let payloadsDropped = 0
    if (Duration.lessThan(policy.payloadPeriod, policy.period)) {
      for (const drop of [dropPayloads, dropEventPayloads]) {
        for (;;) {
          const dropped = yield* drop(sql, payloadCutoff, policy.batchSize, new Date(now))
          batches++
          payloadsDropped += dropped
          if (dropped > 0) yield* Metric.incrementBy(droppedPayloads, dropped)
          if (dropped < policy.batchSize) break
          yield* Effect.sleep(policy.pause)
        }
      }
    }
    for (const kind of [deliveries, events, pushJobs]) {
      const oldest = yield* kind.oldest(sql)
      const age = oldest === null ? 0 : Math.max(0, (now - new Date(oldest).getTime()) / 1000)
      yield* Metric.set(oldestKeptByTable[kind.table], age)
    }
    return { pruned, payloadsDropped, batches }
  }).pipe(Effect.orDie, Effect.withSpan("Retention.round"))

/**
 * Prunes a round every `policy.interval` until interrupted; a failed round is
 * logged and tried again next time. An invalid policy prunes nothing (logged).
 */
export const run = (policy: RetentionPolicy): Effect.Effect<never, never, SqlClient.SqlClient> =>
  validate(policy).pipe(
    Effect.matchEffect({
      onFailure: (error) => Effect.zipRight(Effect.logError(`Retention is off: ${error.message}`), Effect.never),
      onSuccess: rounds
    })
  )

const rounds = (policy: RetentionPolicy): Effect.Effect<never, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const result = yield* round(policy)
    const total = Object.values(result.pruned).reduce((a, b) => a + b, 0)
    if (total > 0 || result.payloadsDropped > 0) {
      yield* Effect.logInfo("Retention pruned finished rows").pipe(
        Effect.annotateLogs({ ...result.pruned, payloads_dropped: result.payloadsDropped, batches: result.batches })
      )
    }
  }).pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("Retention round failed; trying again next round", cause)),
    Effect.zipRight(Effect.sleep(policy.interval)),
    Effect.forever
  )
