/**
 * What claiming and finishing deliveries read: the rows they touch, found
 * by their keys, never the whole `deliveries` table (store migration 0024).
 * A table of finished deliveries is what every install keeps for its
 * retention period; each claim and each finishing statement of the delivery
 * worker ran a sequential scan of it before, which capped a backlog's drain
 * (issue 35: 10 000 deliveries out at 2 000/s).
 *
 * The reads are counted by the database itself, for the current
 * transaction: `pg_stat_xact_user_tables` (the table's scans) and
 * `pg_stat_get_xact_tuples_returned` (the fair index's entries read).
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { JobQueue } from "@crm-relay/store"
import { Clock, Duration, Effect } from "effect"
import { attemptRow, table } from "../src/Deliveries.js"
import * as Harness from "./support/DeliveryHarness.js"

/** Finished deliveries kept, and pending ones due: enough for a scan of the table to look costly to the planner. */
const KEPT = 20_000
const BACKLOG = 20_000

/** Sequential and index scans of `deliveries` so far in this transaction. */
const scans = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ seq_scan: number; idx_scan: number }>`
    SELECT seq_scan::int4 AS seq_scan, COALESCE(idx_scan, 0)::int4 AS idx_scan
    FROM pg_stat_xact_user_tables WHERE relid = 'deliveries'::regclass`
  return rows[0] ?? { seq_scan: 0, idx_scan: 0 }
})

/** Index entries of `deliveries_fair_due_idx` read so far in this transaction. */
const fairIndexRead = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ read: number }>`
    SELECT pg_stat_get_xact_tuples_returned('deliveries_fair_due_idx'::regclass)::int4 AS read`
  return rows[0]?.read ?? 0
})

layer(Harness.layer, { timeout: "120 seconds" })("What a claim reads", (it) => {
  it.effect(
    "a session's claim plan, made while the backlog was small, still finds each row to lock by its key once the backlog is 20 000: the claim of 8 reads a few entries of the fair index, not the backlog",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* Harness.account("Small first")
        const subscription = yield* account.subscribe("https://receiver.localhost/claim-plan")
        const at = new Date(yield* Clock.currentTimeMillis)
        const backlog = (n: number, prefix: string) =>
          sql`
            INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, next_attempt_at)
            SELECT ${account.id}, ${subscription}, 'lead', ${prefix} || n, 'https://receiver.localhost/claim-plan',
              '{"event": "lead"}'::jsonb, ${at}
            FROM generate_series(1, ${n}) AS n`
        const queue = yield* JobQueue.make(table)
        const shares: JobQueue.ClaimShares = { maxPerKey: 32, running: new Map() }
        // One session throughout (a transaction): its first claim makes the plan, the later one reuses it.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* backlog(4, "first-")
          expect(yield* queue.claim(2, Duration.seconds(30), shares)).toHaveLength(2)
          yield* backlog(BACKLOG, "grown-")
          const before = yield* fairIndexRead
          expect(yield* queue.claim(8, Duration.seconds(30), shares)).toHaveLength(8)
          const read = (yield* fairIndexRead) - before
          // The walk of the origins and the 8 due rows (with the 2 leased ones before them), not the backlog.
          expect(read).toBeLessThan(200)
        }))
      })
  )

  it.effect(
    "behind a backlog of 20 000 and beside 20 000 finished deliveries, a claim of 8 and the statement that finishes them read no row of the table by a sequential scan",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* Harness.account()
        const subscription = yield* account.subscribe("https://receiver.localhost/claim-cost")
        // What a busy install holds: finished deliveries (each with its final attempt on its row) and a backlog.
        yield* sql`
          INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, status, attempts,
            delivered_at, final_attempt, final_started_at, final_status_code, final_duration_ms)
          SELECT ${account.id}, ${subscription}, 'lead', 'kept-' || n, 'https://receiver.localhost/claim-cost', '{}'::jsonb,
            'delivered', 1, now(), 1, now(), 200, 3
          FROM generate_series(1, ${KEPT}) AS n`
        yield* sql`
          INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, next_attempt_at)
          SELECT ${account.id}, ${subscription}, 'lead', 'backlog-' || n, 'https://receiver.localhost/claim-cost',
            '{"event": "lead"}'::jsonb, ${new Date(yield* Clock.currentTimeMillis)}
          FROM generate_series(1, ${BACKLOG}) AS n`
        yield* sql`ANALYZE deliveries`

        const queue = yield* JobQueue.make(table)
        const shares: JobQueue.ClaimShares = { maxPerKey: 32, running: new Map() }
        const claimed = yield* sql.withTransaction(Effect.gen(function*() {
          const before = yield* scans
          const claimed = yield* queue.claim(8, Duration.seconds(30), shares)
          expect(claimed).toHaveLength(8)
          const afterClaim = yield* scans
          expect(afterClaim.seq_scan - before.seq_scan).toBe(0)

          const startedAt = new Date()
          yield* queue.finishMany(claimed.map((job) => ({
            id: job.id,
            result: JobQueue.JobResult.Complete({
              set: { delivered_at: startedAt },
              log: attemptRow({
                delivery_id: job.id,
                attempt: job.attempt,
                started_at: startedAt,
                status_code: 200,
                duration_ms: 3,
                error_class: null,
                error: null,
                result: "delivered"
              })
            })
          })))
          const afterFinish = yield* scans
          expect(afterFinish.seq_scan - before.seq_scan).toBe(0)
          // The rows were found through indexes instead.
          expect(afterFinish.idx_scan).toBeGreaterThan(before.idx_scan)
          return claimed
        }))
        const ids = claimed.map((job) => job.id)
        const stored = yield* sql<{ status: string; final_status_code: number; n: number }>`
          SELECT status, final_status_code, count(*)::int4 AS n FROM deliveries WHERE id IN ${sql.in(ids)}
          GROUP BY status, final_status_code`
        expect(stored).toEqual([{ status: "delivered", final_status_code: 200, n: 8 }])
      })
  )
})
