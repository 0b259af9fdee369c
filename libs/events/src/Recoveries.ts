/**
 * Recover: replay every failed or ended delivery of one subscription created
 * in a window (`since` up to `until`, default now), in one call, as a
 * background job with progress.
 *
 * A recovery is a row of `subscription_recoveries`, a JobQueue table (so it
 * survives a restart and runs on one replica at a time). Its worker queues
 * the deliveries again in small batches, oldest first (same ids, so the same
 * `webhook-id`; fresh attempt counts), storing its progress (`queued`,
 * `skipped`, the last delivery done) with each batch: a recovery that is
 * interrupted continues where it stopped. Deliveries whose payload was
 * already dropped by retention cannot be sent again and are counted as
 * `skipped`.
 *
 * Refused, with nothing changed: a window in the future or reversed; an
 * unknown, removed or other account's subscription; a disabled one (enable
 * it first, or its deliveries would end again at once).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { JobQueue, type Notifier } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Clock, Data, Duration, Effect, Option, Schema } from "effect"
import * as Deliveries from "./Deliveries.js"
import { SubscriptionNotFound } from "./SubscriptionLifecycle.js"

/** Deliveries queued again per batch (one short transaction each). */
export const BATCH_SIZE = 200

/** What the recovery worker reads with each claimed recovery. */
export const RecoveryJob = Schema.Struct({
  subscription_id: Schema.String,
  since: Schema.DateFromSelf,
  until: Schema.DateFromSelf,
  after_seq: Schema.NumberFromString
})
export type RecoveryJob = typeof RecoveryJob.Type

/** The recoveries table as a job queue. */
export const table = JobQueue.table({
  table: "subscription_recoveries",
  row: RecoveryJob,
  select: "subscription_id, since, until, after_seq::text AS after_seq"
})

/** A recovery's state: waiting or running (`pending`), `done`, or `failed`. */
export const RecoveryStatus = Schema.Literal("pending", "done", "failed")

/** A recovery and its progress. */
export const Recovery = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  subscription_id: Schema.String,
  since: Schema.DateFromSelf,
  until: Schema.DateFromSelf,
  status: RecoveryStatus,
  /** Failed or ended deliveries in the window when the recovery was asked for. */
  total: Schema.Int,
  /** Queued again so far. */
  queued: Schema.Int,
  /** Not queued: their payload was dropped by retention. */
  skipped: Schema.Int,
  created_at: Schema.DateFromSelf,
  finished_at: Schema.NullOr(Schema.DateFromSelf),
  last_error: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Recovery" })
export type Recovery = typeof Recovery.Type

/** Why a recover window was refused. */
export class InvalidRecoverWindow extends Data.TaggedError("InvalidRecoverWindow")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

/** The subscription is disabled: its deliveries would end again at once. */
export class SubscriptionDisabled extends Data.TaggedError("SubscriptionDisabled")<{ readonly subscriptionId: string }> {
  override get message() {
    return `Subscription ${this.subscriptionId} is disabled; enable it first, then recover.`
  }
}

const columns = `id, account_id, subscription_id, since, until, status, total, queued, skipped, created_at, finished_at, last_error`

/** Starts recoveries and reads their progress. */
export class Recoveries extends Effect.Service<Recoveries>()("@crm-relay/events/Recoveries", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* JobQueue.controls(table)
    const decode = Schema.decodeUnknown(Schema.Array(Recovery))
    const select = sql.literal(columns)

    return {
      /**
       * Asks for the failed and ended deliveries of `subscriptionId` (of
       * `accountId`) created from `since` to `until` (default now) to be sent
       * again; answers the recovery, which runs in the background.
       */
      start: Effect.fn("Recoveries.start")(function*(
        accountId: string,
        subscriptionId: string,
        window: { readonly since: Date; readonly until?: Date | undefined }
      ) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const until = window.until ?? now
        if (Number.isNaN(window.since.getTime()) || Number.isNaN(until.getTime())) {
          return yield* new InvalidRecoverWindow({ reason: "since and until must be dates and times, e.g. 2026-01-31T12:00:00Z." })
        }
        if (window.since.getTime() > now.getTime()) {
          return yield* new InvalidRecoverWindow({ reason: `since (${window.since.toISOString()}) is in the future; recover replays what already happened.` })
        }
        if (until.getTime() > now.getTime()) {
          return yield* new InvalidRecoverWindow({ reason: `until (${until.toISOString()}) is in the future; leave it out to recover up to now.` })
        }
        if (until.getTime() < window.since.getTime()) {
          return yield* new InvalidRecoverWindow({ reason: `The window is reversed: until (${until.toISOString()}) is before since (${window.since.toISOString()}).` })
        }
        if (!isUuid(accountId) || !isUuid(subscriptionId)) return yield* new SubscriptionNotFound({ subscriptionId })
        const recovery = yield* sql.withTransaction(Effect.gen(function*() {
          const found = yield* sql<{ disabled_at: Date | null }>`SELECT disabled_at FROM subscriptions
            WHERE id = ${subscriptionId} AND account_id = ${accountId} AND removed_at IS NULL FOR SHARE`.pipe(Effect.orDie)
          if (found.length === 0) return yield* new SubscriptionNotFound({ subscriptionId })
          if (found[0]!.disabled_at !== null) return yield* new SubscriptionDisabled({ subscriptionId })
          const rows = yield* sql`INSERT INTO subscription_recoveries (account_id, subscription_id, since, until, total, next_attempt_at)
            SELECT ${accountId}, ${subscriptionId}, ${window.since}, ${until}, count(*), ${now}
            FROM deliveries WHERE subscription_id = ${subscriptionId} AND status IN ('failed', 'ended')
              AND created_at >= ${window.since} AND created_at <= ${until}
            RETURNING ${select}`.pipe(Effect.flatMap(decode), Effect.orDie)
          return rows[0]!
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        yield* queue.wake
        yield* Audit.record("subscription.recovery_started", {
          account_id: accountId,
          subscription_id: subscriptionId,
          recovery_id: recovery.id,
          since: recovery.since.toISOString(),
          until: recovery.until.toISOString(),
          total: recovery.total
        })
        return recovery
      }),

      /** A recovery of `accountId` with its progress. */
      find: Effect.fn("Recoveries.find")(function*(accountId: string, id: string) {
        if (!isUuid(accountId) || !isUuid(id)) return Option.none<Recovery>()
        const rows = yield* sql`SELECT ${select} FROM subscription_recoveries WHERE id = ${id} AND account_id = ${accountId}`.pipe(
          Effect.flatMap(decode),
          Effect.orDie
        )
        return Option.fromNullable(rows[0])
      })
    }
  })
}) {}

/** Queues the next batch of a recovery; answers how many deliveries it looked at (0: done). */
const batch = (job: JobQueue.Job<RecoveryJob>, after: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date(yield* Clock.currentTimeMillis)
    const { since, subscription_id, until } = job.data
    const rows = yield* sql<{ id: string; seq: string | number; dropped: boolean }>`SELECT id, seq,
        ${sql.literal(Deliveries.payloadDroppedSql)} AS dropped
      FROM deliveries WHERE subscription_id = ${subscription_id} AND status IN ('failed', 'ended') AND seq > ${after}
        AND created_at >= ${since} AND created_at <= ${until}
      ORDER BY seq LIMIT ${BATCH_SIZE} FOR UPDATE`
    if (rows.length === 0) return { seen: 0, last: after }
    const sendable = rows.filter((r) => !r.dropped).map((r) => r.id)
    if (sendable.length > 0) {
      // As a replay does (each row's final attempt kept in the attempt log), for the whole batch at once.
      yield* JobQueue.requeue(sql, Deliveries.table, sql`id IN ${sql.in(sendable)}`, now, sql`end_reason = NULL, last_error = NULL`)
      yield* JobQueue.wake(Deliveries.table)
    }
    const last = Math.max(...rows.map((r) => Number(r.seq)))
    yield* sql`UPDATE subscription_recoveries SET queued = queued + ${sendable.length},
      skipped = skipped + ${rows.length - sendable.length}, after_seq = ${last} WHERE id = ${job.id}`
    return { seen: rows.length, last }
  })

/** Runs one claimed recovery to its end, a batch per transaction. */
export const handle = (job: JobQueue.Job<RecoveryJob>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    let after = job.data.after_seq
    for (;;) {
      const done = yield* sql.withTransaction(batch(job, after))
      if (done.seen === 0) break
      after = done.last
    }
    const at = new Date(yield* Clock.currentTimeMillis)
    yield* Audit.record("subscription.recovered", { subscription_id: job.data.subscription_id, recovery_id: job.id })
    return JobQueue.JobResult.Complete({ set: { finished_at: at } })
  }).pipe(
    Effect.catchTag("SqlError", (error) =>
      Effect.succeed(JobQueue.JobResult.Retry({ delay: Duration.seconds(30), error: `The database failed: ${error.message}` })))
  )

/** Runs recoveries until interrupted (one at a time per replica; each is short work in batches). */
export const run = (
  options: JobQueue.RunOptions = {}
): Effect.Effect<never, never, SqlClient.SqlClient | Notifier.Notifier> =>
  JobQueue.run(table, handle, { concurrency: 1, ...options })
