/**
 * The attempt that finishes a delivery is stored on the delivery's row
 * (store migration 0022), not as a `delivery_attempts` row; retries, and
 * earlier runs of a replayed delivery, stay rows of the log. Whatever the
 * storage, the operator reads the same: `find` lists every attempt oldest
 * first, the listing shows the latest. The worker POSTs to real HTTPS
 * receivers on loopback, on a real database; time on the TestClock.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { JobQueue } from "@crm-relay/store"
import { Duration, Effect, Fiber, Option, TestClock } from "effect"
import { type Attempt, Deliveries, type Delivery, table } from "../src/Deliveries.js"
import * as Recoveries from "../src/Recoveries.js"
import * as Harness from "./support/DeliveryHarness.js"

const { realisticNow } = Harness

/** The `delivery_attempts` rows of a delivery: attempt and result, in the order written. */
const logged = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ attempt: number; result: string }>`SELECT attempt, result FROM delivery_attempts WHERE delivery_id = ${id} ORDER BY id`.pipe(
      Effect.map((rows) => rows.map((row) => [row.attempt, row.result])),
      Effect.orDie
    ))

/** The delivery as the operator finds it (attempts oldest first) and as the account's listing shows it. */
const seen = (accountId: string, id: string) =>
  Effect.gen(function*() {
    const deliveries = yield* Deliveries
    const found = Option.getOrThrow(yield* deliveries.find(id))
    const listed = (yield* deliveries.list(accountId, { limit: 100 })).deliveries.find((d) => d.id === id)!
    return { attempts: found.attempts, listed, detail: found.delivery }
  })

/** The listing's latest attempt of `d`, in the attempt's own words. */
const lastOf = (d: Delivery) => ({
  started_at: d.last_attempt_at,
  status_code: d.last_status_code,
  error_class: d.last_error_class,
  duration_ms: d.last_duration_ms
})

/** The same facts of an attempt from `find`. */
const factsOf = (a: Attempt) => ({ started_at: a.started_at, status_code: a.status_code, error_class: a.error_class, duration_ms: a.duration_ms })

const withRecoveries = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const worker = yield* Recoveries.run({ pollInterval: Duration.millis(200) }).pipe(Effect.fork)
    return yield* body.pipe(Effect.ensuring(Fiber.interrupt(worker)))
  })

layer(Harness.layer)("The attempt that finishes a delivery", (it) => {
  it.effect("Delivered at the first attempt: no delivery_attempts row is written, yet find lists attempt 1 with its status code, duration and time, and the listing shows it as the last attempt", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/first", [{ status: 204 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/first", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        const row = yield* Harness.settled(id!, 1)
        expect(row.status).toBe("delivered")
        expect(yield* logged(id!)).toEqual([])
        const { attempts, listed } = yield* seen(account.id, id!)
        expect(attempts).toHaveLength(1)
        expect(attempts[0]).toMatchObject({ attempt: 1, status_code: 204, error_class: null, error: null, result: "delivered" })
        expect(attempts[0]!.started_at).toEqual(row.delivered_at)
        expect(attempts[0]!.duration_ms).toBeGreaterThanOrEqual(0)
        expect(lastOf(listed)).toEqual(factsOf(attempts[0]!))
      }))
    }))

  it.effect("Retried, then delivered: the retry is a delivery_attempts row and the success is on the delivery; find lists both in order, the listing shows the success", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/flaky", [{ status: 503 }, { status: 200 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/flaky", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        const first = yield* Harness.settled(id!, 1)
        expect(first.status).toBe("pending")
        yield* TestClock.setTime(first.next_attempt_at.getTime())
        expect((yield* Harness.settled(id!, 2)).status).toBe("delivered")
        expect(yield* logged(id!)).toEqual([[1, "retry"]])
        const { attempts, listed } = yield* seen(account.id, id!)
        expect(attempts.map((a) => [a.attempt, a.status_code, a.error_class, a.result])).toEqual([
          [1, 503, "server_error", "retry"],
          [2, 200, null, "delivered"]
        ])
        expect(attempts[1]!.started_at.getTime()).toBeGreaterThan(attempts[0]!.started_at.getTime())
        expect(lastOf(listed)).toEqual(factsOf(attempts[1]!))
      }))
    }))

  it.effect("Replay: the first run's final attempt moves into the attempt log in the replay's own statement, so after the second run find lists both runs' attempts in order and the listing shows the new one", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/again", [{ status: 200 }, { status: 202 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/again", "receiver.localhost"))
      const deliveries = yield* Deliveries
      const [id] = yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        yield* Harness.settled(ids[0]!, 1)
        return ids
      }))
      const before = yield* seen(account.id, id!)
      // No worker runs: what the replay wrote is all there is.
      expect(yield* deliveries.replay(id!)).toBe("queued")
      expect(yield* logged(id!)).toEqual([[1, "delivered"]])
      const queued = yield* seen(account.id, id!)
      expect(queued.detail.status).toBe("pending")
      expect(queued.attempts).toEqual(before.attempts)
      expect(lastOf(queued.listed)).toEqual(lastOf(before.listed))
      yield* TestClock.adjust(Duration.seconds(1))
      yield* Harness.withWorker(Effect.gen(function*() {
        yield* Harness.wake
        expect((yield* Harness.settled(id!, 2)).status).toBe("delivered")
      }))
      const after = yield* seen(account.id, id!)
      expect(after.attempts.map((a) => [a.attempt, a.status_code, a.result])).toEqual([[1, 200, "delivered"], [1, 202, "delivered"]])
      expect(after.attempts[0]).toEqual(before.attempts[0])
      expect(after.attempts[1]!.started_at.getTime()).toBeGreaterThan(after.attempts[0]!.started_at.getTime())
      expect(lastOf(after.listed)).toEqual(factsOf(after.attempts[1]!))
      expect(yield* logged(id!)).toEqual([[1, "delivered"]])
    }))

  it.effect("Recover: each ended delivery's final attempt is kept in the attempt log when the recovery queues it again, then the new run's attempt follows it", () =>
    Effect.gen(function*() {
      const t0 = yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/recover", [{ status: 422, headers: { "webhook-delivery": "abort-message" } }, { status: 200 }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/recover", "receiver.localhost"))
      const [id] = yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        expect((yield* Harness.settled(ids[0]!, 1)).status).toBe("ended")
        return ids
      }))
      expect(yield* logged(id!)).toEqual([])
      yield* TestClock.adjust(Duration.seconds(1))
      const recoveries = yield* Recoveries.Recoveries
      yield* Harness.withWorker(withRecoveries(Effect.gen(function*() {
        const recovery = yield* recoveries.start(account.id, subscriptionId, { since: new Date(t0) })
        expect(recovery.total).toBe(1)
        expect((yield* Harness.settled(id!, 2)).status).toBe("delivered")
      })))
      expect(yield* logged(id!)).toEqual([[1, "ended"]])
      const { attempts, listed } = yield* seen(account.id, id!)
      expect(attempts.map((a) => [a.attempt, a.status_code, a.error_class, a.result])).toEqual([
        [1, 422, "aborted", "ended"],
        [1, 200, null, "delivered"]
      ])
      expect(lastOf(listed)).toEqual(factsOf(attempts[1]!))
    }))

  it.effect("Rolling upgrade: a final attempt left on a row queued again by a replica of the previous release (its replay does not move it) is kept as a delivery_attempts row before the next run's final attempt takes its place", () =>
    Effect.gen(function*() {
      const now = new Date(yield* realisticNow)
      const sql = yield* SqlClient.SqlClient
      const account = yield* Harness.account()
      yield* account.subscribe("https://upgrade.example.com/hook")
      const [id] = yield* Harness.lead(account.id)
      const queue = yield* JobQueue.make(table, "after-upgrade")
      const earlier = new Date(now.getTime() - 60_000)
      // Failed at its first attempt, then replayed as the previous release does: pending again, the row's attempt left in place.
      yield* sql`UPDATE deliveries SET status = 'pending', attempts = 1, lease_owner = ${queue.owner},
        lease_expires_at = ${new Date(now.getTime() + 30_000)}, final_attempt = 1, final_started_at = ${earlier},
        final_status_code = 500, final_duration_ms = 9, final_error_class = 'server_error', final_error = 'The receiver answered 500.'
        WHERE id = ${id!}`
      const attempt = { delivery_id: id!, attempt: 1, started_at: now, status_code: 200, duration_ms: 4, error_class: null, error: null, result: "delivered" }
      expect(yield* queue.finishMany([{ id: id!, result: JobQueue.JobResult.Complete({ set: { delivered_at: now }, log: attempt }) }])).toEqual(new Set([id]))
      expect(yield* logged(id!)).toEqual([[1, "failed"]])
      const { attempts, listed } = yield* seen(account.id, id!)
      expect(attempts.map((a) => [a.attempt, a.started_at, a.status_code, a.error_class, a.result])).toEqual([
        [1, earlier, 500, "server_error", "failed"],
        [1, now, 200, null, "delivered"]
      ])
      expect(lastOf(listed)).toEqual(factsOf(attempts[1]!))
    }))
})
