/**
 * Retention over deliveries sent to a real HTTPS receiver on loopback and
 * push jobs of the call pipeline, on a real database (PGlite, or PostgreSQL
 * with DATABASE_URL); time runs on the TestClock.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Retention } from "@crm-relay/store"
import { Clock, Duration, Effect, Layer, Logger, LogLevel, Metric, TestClock } from "effect"
import * as Deliveries from "../src/Deliveries.js"
import * as Harness from "./support/DeliveryHarness.js"

const quiet = Layer.merge(Harness.layer, Logger.minimumLogLevel(LogLevel.None))
const day = Duration.toMillis(Duration.days(1))

const pruned = (table: string) => Effect.map(Metric.value(Metric.tagged(Retention.prunedRows, "table", table)), (s) => s.count)

/** A finished push job (with one receipt) of a new call, last changed at `at`, or a pending one. */
const pushJob = (accountId: string, callId: string, at: Date, status: "succeeded" | "pending") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO call_outcomes (call_id, account_id, tenant_id, classification, body, body_digest, route)
      VALUES (${callId}, ${accountId}, 't1', 'lead', '{}'::jsonb, 'digest', 'push')`
    const rows = yield* sql<{ id: string }>`INSERT INTO crm_push_jobs (call_id, account_id, tenant_id, status, updated_at, created_at)
      VALUES (${callId}, ${accountId}, 't1', ${status}, ${at}, ${at}) RETURNING id`
    yield* sql`INSERT INTO crm_push_receipts (job_id, operation, idempotency_key, outcome, receipt, created_at)
      VALUES (${rows[0]!.id}, 'contacts.upsert', ${`key-${callId}`}, 'receipt', '{}'::jsonb, ${at})`
    return rows[0]!.id
  }).pipe(Effect.orDie)

const count = (query: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe<{ n: number | string }>(query).pipe(Effect.map((rows) => Number(rows[0]!.n)), Effect.orDie))

layer(quiet)("Retention", (it) => {
  it.effect("Retention: delivered and ended deliveries with their attempts, and finished push jobs with their receipts, older than the period are pruned in batches of RETENTION_BATCH_SIZE; pending work and recent rows stay; payloads are dropped sooner; rows pruned and the oldest row kept are metrics", () =>
    Effect.gen(function*() {
      const t0 = Math.max(yield* Clock.currentTimeMillis, Date.now()) + 1000
      yield* TestClock.setTime(t0)
      const { main } = yield* Harness.Receivers
      main.script("/retained", [{ status: 200 }])
      main.script("/retained-abort", [{ status: 400, headers: { "webhook-delivery": "abort-message" } }])
      main.script("/retained-flaky", [{ status: 503 }, { status: 200 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/retained", "receiver.localhost"))
      const old: Array<string> = []
      const recent: Array<string> = []
      yield* Harness.withWorker(Effect.gen(function*() {
        for (let i = 0; i < 5; i++) old.push(...(yield* Harness.lead(account.id)))
        for (const id of old) yield* Harness.settled(id, 1)
        const other = yield* Harness.account("Aborting")
        yield* other.subscribe(main.url("/retained-abort", "receiver.localhost"))
        for (let i = 0; i < 2; i++) old.push(...(yield* Harness.lead(other.id)))
        for (const id of old) yield* Harness.settled(id, 1)
        // Retried once: its first attempt is a delivery_attempts row (the one that finished it is on the delivery, store migration 0022).
        const flaky = yield* Harness.account("Flaky")
        yield* flaky.subscribe(main.url("/retained-flaky", "receiver.localhost"))
        const [retried] = yield* Harness.lead(flaky.id)
        old.push(retried!)
        yield* TestClock.setTime((yield* Harness.settled(retried!, 1)).next_attempt_at.getTime())
        yield* Harness.settled(retried!, 2)
        yield* TestClock.setTime(t0 + 10 * day)
        for (let i = 0; i < 2; i++) recent.push(...(yield* Harness.lead(account.id)))
        for (const id of recent) yield* Harness.settled(id, 1)
      }))
      expect((yield* Effect.forEach(old, Harness.row)).map((r) => r.status).sort()).toEqual([
        "delivered", "delivered", "delivered", "delivered", "delivered", "delivered", "ended", "ended"
      ])
      // Still pending (no worker runs): never pruned, whatever its age.
      yield* TestClock.setTime(t0)
      const [pending] = yield* Harness.lead(account.id)
      const jobs = yield* Effect.forEach([1, 2, 3], (n) => pushJob(account.id, `retention-call-${n}`, new Date(t0), "succeeded"))
      const pendingJob = yield* pushJob(account.id, "retention-call-pending", new Date(t0), "pending")

      yield* TestClock.setTime(t0 + 31 * day)
      const before = {
        deliveries: yield* pruned("deliveries"),
        attempts: yield* pruned("delivery_attempts"),
        jobs: yield* pruned("crm_push_jobs"),
        receipts: yield* pruned("crm_push_receipts")
      }
      const policy: Retention.RetentionPolicy = {
        ...Retention.DEFAULT_POLICY,
        period: Duration.days(30),
        payloadPeriod: Duration.days(20),
        batchSize: 3,
        pause: Duration.zero
      }
      const result = yield* Retention.round(policy)
      // Each old lead was one event (fanned out to one subscription): it goes after its delivery.
      // The attempt that finished each is on its row, gone with it; only the retried one's first attempt is a row of its own.
      expect(result.pruned).toEqual({ deliveries: 8, delivery_attempts: 1, events: 8, crm_push_jobs: 3, crm_push_receipts: 3 })
      expect(result.payloadsDropped).toBe(2)
      // Deliveries 3 + 3 + 2, events 3 + 3 + 2, push jobs 3 + 0, payloads kept by deliveries 0, by events 2:
      // each batch one statement of at most 3 rows.
      expect(result.batches).toBe(10)

      const sql = yield* SqlClient.SqlClient
      // The payload a delivery sends is its event's: dropped there, once no delivery of the event is pending.
      const kept = yield* sql<{ id: string; has_payload: boolean; payload_dropped_at: Date | null }>`SELECT deliveries.id,
          NOT ${sql.literal(Deliveries.payloadDroppedSql)} AS has_payload, e.payload_dropped_at
        FROM deliveries LEFT JOIN events AS e ON e.id = deliveries.event_id
        WHERE deliveries.id IN ${sql.in([...old, ...recent, pending!])}
        ORDER BY deliveries.seq`.pipe(Effect.orDie)
      expect(kept.map((r) => [r.id, r.has_payload])).toEqual([[recent[0], false], [recent[1], false], [pending, true]])
      expect(kept[0]!.payload_dropped_at?.getTime()).toBe(t0 + 31 * day)
      expect(yield* count(`SELECT count(*) AS n FROM delivery_attempts WHERE delivery_id IN ('${old.join("','")}')`)).toBe(0)
      expect(yield* count(`SELECT count(*) AS n FROM crm_push_jobs WHERE id IN ('${jobs.join("','")}')`)).toBe(0)
      expect(yield* count(`SELECT count(*) AS n FROM crm_push_jobs WHERE id = '${pendingJob}'`)).toBe(1)
      expect(yield* count(`SELECT count(*) AS n FROM call_outcomes WHERE call_id LIKE 'retention-call-%'`)).toBe(4)

      expect((yield* pruned("deliveries")) - before.deliveries).toBe(8)
      expect((yield* pruned("delivery_attempts")) - before.attempts).toBe(1)
      expect((yield* pruned("crm_push_jobs")) - before.jobs).toBe(3)
      expect((yield* pruned("crm_push_receipts")) - before.receipts).toBe(3)
      const oldest = yield* Metric.value(Metric.tagged(Retention.oldestKept, "table", "deliveries"))
      expect(oldest.value).toBe(21 * day / 1000)

      // A second round finds nothing more to do.
      const again = yield* Retention.round(policy)
      expect(again.pruned).toEqual({ deliveries: 0, delivery_attempts: 0, events: 0, crm_push_jobs: 0, crm_push_receipts: 0 })
      expect(again.payloadsDropped).toBe(0)
    }))
})

describe("Retention settings", () => {
  it.effect("Bad input: a retention period of zero, a payload period longer than the rows', a batch of 0 → a clear typed error (nothing is pruned)", () =>
    Effect.gen(function*() {
      const refused = (policy: Partial<Retention.RetentionPolicy>) =>
        Effect.flip(Retention.validate({ ...Retention.DEFAULT_POLICY, ...policy }))
      expect((yield* refused({ period: Duration.zero })).message).toBe("The retention period must be a positive duration, e.g. \"30 days\".")
      expect((yield* refused({ payloadPeriod: Duration.zero }))._tag).toBe("InvalidRetention")
      expect((yield* refused({ period: Duration.infinity }))._tag).toBe("InvalidRetention")
      expect((yield* refused({ payloadPeriod: Duration.days(31) })).message).toMatch(/cannot be longer than the retention period/)
      expect((yield* refused({ batchSize: 0 })).message).toBe("The retention batch size must be a whole number from 1 to 10000.")
      expect(yield* Retention.validate(Retention.DEFAULT_POLICY)).toEqual(Retention.DEFAULT_POLICY)
    }))
})
