/**
 * The operator's view of deliveries: an account's deliveries latest first,
 * paginated by cursor, with status, attempts, last error, next attempt and
 * the latest attempt; one delivery with all its attempts.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { JobQueue } from "@crm-relay/store"
import { Clock, Duration, Effect, Option, TestClock } from "effect"
import { Deliveries, type DeliveryPage, recordAttempt, table } from "../src/Deliveries.js"
import * as Harness from "./support/DeliveryHarness.js"

layer(Harness.layer)("Deliveries", (it) => {
  it.effect("Listing: latest first, paginated with limit and cursor, another account's deliveries never shown", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2031, 0, 1))
      const account = yield* Harness.account()
      const other = yield* Harness.account("Other")
      yield* account.subscribe("https://hooks.example.com/a")
      yield* other.subscribe("https://hooks.example.com/b")
      const ids: Array<string> = []
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust(Duration.seconds(1))
        ids.push(...(yield* Harness.lead(account.id, `call-list-${i}`)))
        yield* Harness.lead(other.id)
      }
      const deliveries = yield* Deliveries
      const first = yield* deliveries.list(account.id, { limit: 2 })
      expect(first.deliveries.map((d) => d.id)).toEqual([ids[4], ids[3]])
      expect(first.nextCursor).toEqual(Option.some(ids[3]))
      const second = yield* deliveries.list(account.id, { limit: 2, cursor: ids[3]! })
      expect(second.deliveries.map((d) => d.id)).toEqual([ids[2], ids[1]])
      const last = yield* deliveries.list(account.id, { limit: 2, cursor: ids[1]! })
      expect(last.deliveries.map((d) => d.id)).toEqual([ids[0]])
      expect(last.nextCursor).toEqual(Option.none())
      const all = yield* deliveries.list(account.id)
      expect(all.deliveries).toHaveLength(5)
      expect(all.deliveries[0]).toMatchObject({
        id: ids[4],
        event: "lead",
        call_id: "call-list-4",
        target_url: "https://hooks.example.com/a",
        status: "pending",
        attempts: 0,
        last_error: null,
        delivered_at: null,
        last_attempt_at: null,
        last_status_code: null,
        last_error_class: null
      })
      expect(all.deliveries[0]!.next_attempt_at.getTime()).toBe(yield* Clock.currentTimeMillis)
      // A cursor of another account (or not a delivery at all) is refused.
      const otherId = (yield* deliveries.list(other.id, { limit: 1 })).deliveries[0]!.id
      expect((yield* Effect.flip(deliveries.list(account.id, { cursor: otherId })))._tag).toBe("UnknownCursor")
      expect((yield* Effect.flip(deliveries.list(account.id, { cursor: "nope" })))._tag).toBe("UnknownCursor")
      // Unknown accounts have no deliveries; limits are clamped.
      expect((yield* deliveries.list("not-a-uuid")).deliveries).toEqual([])
      expect((yield* deliveries.list(account.id, { limit: 0 })).deliveries).toHaveLength(1)
    }))

  it.effect("Listing: deliveries created in the same instant come latest first in creation order, and the cursor pages through them without a gap", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2031, 2, 1))
      const account = yield* Harness.account()
      yield* account.subscribe("https://hooks.example.com/one")
      yield* account.subscribe("https://hooks.example.com/two")
      const created: Array<string> = []
      for (let i = 0; i < 6; i++) created.push(...(yield* Harness.lead(account.id, `call-instant-${i}`)))
      const latestFirst = [...created].reverse()
      const deliveries = yield* Deliveries
      expect((yield* deliveries.list(account.id, { limit: 50 })).deliveries.map((d) => d.id)).toEqual(latestFirst)
      const paged: Array<string> = []
      let cursor: string | undefined = undefined
      do {
        const page: DeliveryPage = yield* deliveries.list(account.id, { limit: 5, cursor })
        paged.push(...page.deliveries.map((d) => d.id))
        cursor = Option.getOrUndefined(page.nextCursor)
      } while (cursor !== undefined)
      expect(paged).toEqual(latestFirst)
    }).pipe(Effect.orDie))

  it.effect("Attempts: every attempt is kept; the listing shows the latest; find shows them all, oldest first", () =>
    Effect.gen(function*() {
      const account = yield* Harness.account()
      yield* account.subscribe("https://hooks.example.com/x")
      const [id] = yield* Harness.lead(account.id)
      const sql = yield* SqlClient.SqlClient
      const at = (s: number) => new Date(Date.UTC(2031, 1, 1, 0, 0, s))
      yield* recordAttempt({ delivery_id: id!, attempt: 1, started_at: at(1), status_code: 503, duration_ms: 12, error_class: "server_error", error: "The receiver answered 503.", result: "retry" })
      yield* recordAttempt({ delivery_id: id!, attempt: 2, started_at: at(9), status_code: 200, duration_ms: 7, error_class: null, error: null, result: "delivered" })
      yield* sql`UPDATE deliveries SET status = 'delivered', attempts = 2, delivered_at = ${at(9)} WHERE id = ${id!}`
      const deliveries = yield* Deliveries
      const [listed] = (yield* deliveries.list(account.id)).deliveries
      expect(listed).toMatchObject({ status: "delivered", attempts: 2, last_status_code: 200, last_error_class: null, delivered_at: at(9), last_attempt_at: at(9) })
      const found = Option.getOrThrow(yield* deliveries.find(id!))
      expect(found.attempts.map((a) => [a.attempt, a.status_code, a.duration_ms, a.error_class, a.result])).toEqual([
        [1, 503, 12, "server_error", "retry"],
        [2, 200, 7, null, "delivered"]
      ])
      expect(yield* deliveries.find("00000000-0000-4000-8000-000000000000")).toEqual(Option.none())
      expect(yield* deliveries.find("nope")).toEqual(Option.none())
    }).pipe(Effect.orDie))

  it.effect("Claim: the fair claim function of the deliveries (migration 0011) claims what JobQueue's own statement claims, with the same columns", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2031, 2, 1))
      const sql = yield* SqlClient.SqlClient
      const account = yield* Harness.account()
      const other = yield* Harness.account("Other")
      yield* account.subscribe("https://x.example.com/hook")
      yield* account.subscribe("https://y.example.com/hook")
      yield* other.subscribe("https://Y.example.com/other")
      // Apart in time: a key's oldest due rows are claimed first, and ties may go either way.
      for (const id of [account.id, account.id, other.id]) {
        yield* TestClock.adjust(Duration.seconds(1))
        yield* Harness.lead(id)
      }
      yield* TestClock.adjust(Duration.seconds(1))
      yield* sql`UPDATE subscriptions SET removed_at = now(), removed_reason = 'gone' WHERE target_url = 'https://x.example.com/hook'`
      yield* sql`UPDATE subscriptions SET failure_window_count = 1 WHERE target_url = 'https://y.example.com/hook'`
      // Room for both of x's deliveries and one of y's three (one already running): the rooms decide.
      const shares: JobQueue.ClaimShares = { maxPerKey: 2, running: new Map([["https://y.example.com", 1]]) }
      const viaFunction = yield* JobQueue.make(table, "claim-function")
      const viaStatement = yield* JobQueue.make({ ...table, claimFunction: undefined }, "claim-statement")
      const byId = (a: JobQueue.Job<unknown>, b: JobQueue.Job<unknown>) => a.id.localeCompare(b.id)
      const claimed = [...yield* viaFunction.claim(10, Duration.seconds(30), shares)].sort(byId)
      // (Earlier tests of this file left deliveries of other origins pending.)
      const isOurs = (job: JobQueue.Job<unknown>) => job.key === "https://x.example.com" || job.key === "https://y.example.com"
      const ours = claimed.filter(isOurs)
      expect(ours.map((job) => job.key).sort()).toEqual(["https://x.example.com", "https://x.example.com", "https://y.example.com"])
      expect(new Set(ours.map((job) => (job.data as { subscription_state: string }).subscription_state))).toEqual(new Set(["gone", "failing"]))
      expect(yield* viaFunction.release(claimed.map((job) => job.id))).toBe(claimed.length)
      const again = [...yield* viaStatement.claim(10, Duration.seconds(30), shares)].sort(byId)
      expect(again.filter(isOurs)).toEqual(ours)
    }).pipe(Effect.orDie))

  it.effect("Finish: the finish function of the deliveries (migration 0022) stores the state JobQueue's own statement stores and the attempts the operator reads are the same; the attempt that finishes a delivery under its lease is kept on the row, not as a log row; a worker whose lease was taken over changes nothing, and its attempt is still logged", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2031, 3, 1))
      const now = new Date(yield* Clock.currentTimeMillis)
      const sql = yield* SqlClient.SqlClient
      const account = yield* Harness.account()
      yield* account.subscribe("https://finish.example.com/hook")
      const attempt = (id: string, result: string) => ({
        delivery_id: id,
        attempt: 1,
        started_at: now,
        status_code: result === "delivered" ? 200 : 503,
        duration_ms: 3,
        error_class: result === "delivered" ? null : "server_error",
        error: result === "delivered" ? null : "The receiver answered 503.",
        result
      })
      // The same results stored once through the function and once through the statement, on rows alike.
      const store = (queue: JobQueue.JobQueue<unknown>) =>
        Effect.gen(function*() {
          const ids: Array<string> = []
          for (let i = 0; i < 5; i++) ids.push(...(yield* Harness.lead(account.id)))
          const [delivered, retried, ended, failed, takenOver] = ids as [string, string, string, string, string]
          yield* sql`UPDATE deliveries SET lease_owner = ${queue.owner}, lease_expires_at = ${new Date(now.getTime() + 30_000)},
            attempts = 1 WHERE id IN ${sql.in(ids)}`
          // Another worker took this one over (the first one's lease had expired).
          yield* sql`UPDATE deliveries SET lease_owner = 'the-other-worker', attempts = 2 WHERE id = ${takenOver}`
          const held = yield* queue.finishMany([
            { id: delivered, result: JobQueue.JobResult.Complete({ set: { delivered_at: now }, log: attempt(delivered, "delivered") }) },
            { id: retried, result: JobQueue.JobResult.Retry({ delay: "5 seconds", error: "The receiver answered 503.", log: attempt(retried, "retry") }) },
            {
              id: ended,
              result: JobQueue.JobResult.End({ status: "ended", reason: "The receiver answered 410 Gone.", set: { end_reason: "gone" }, log: attempt(ended, "ended") })
            },
            { id: failed, result: JobQueue.JobResult.DeadLetter({ error: "Not sent.", log: attempt(failed, "failed") }) },
            { id: takenOver, result: JobQueue.JobResult.Complete({ set: { delivered_at: now }, log: attempt(takenOver, "delivered") }) }
          ])
          expect(held).toEqual(new Set([delivered, retried, ended, failed]))
          const rows = yield* sql<Record<string, unknown>>`SELECT status, attempts, last_error, next_attempt_at, delivered_at, end_reason,
            lease_owner, lease_expires_at FROM deliveries WHERE id IN ${sql.in(ids)} ORDER BY seq`
          const logged = yield* sql<{ delivery_id: string; result: string; status_code: number | null }>`
            SELECT delivery_id, result, status_code FROM delivery_attempts WHERE delivery_id IN ${sql.in(ids)} ORDER BY id`
          // What the operator reads, wherever each attempt was stored.
          const read = yield* Effect.forEach(ids, (id) =>
            Effect.map(Harness.attempts(id), (attempts) => attempts.map((a) => [a.attempt, a.result, a.status_code])))
          expect(read).toEqual([[[1, "delivered", 200]], [[1, "retry", 503]], [[1, "ended", 503]], [[1, "failed", 503]], [[1, "delivered", 200]]])
          return { rows, logged: logged.map((row) => [ids.indexOf(row.delivery_id), row.result, row.status_code]) }
        })
      const viaFunction = yield* store(yield* JobQueue.make(table, "finish-function"))
      const viaStatement = yield* store(yield* JobQueue.make({ ...table, finishFunction: undefined }, "finish-statement"))
      expect(viaFunction.rows).toEqual(viaStatement.rows)
      expect(viaStatement.logged).toEqual([[0, "delivered", 200], [1, "retry", 503], [2, "ended", 503], [3, "failed", 503], [4, "delivered", 200]])
      // Migration 0022: the function keeps an attempt that finished a delivery under its owner's lease on the row;
      // the retry and the attempt of the worker whose lease was taken over are still rows of the log.
      expect(viaFunction.logged).toEqual([[1, "retry", 503], [4, "delivered", 200]])
      const rows = viaFunction.rows
      expect(rows.map((row) => [row["status"], row["last_error"], row["end_reason"], row["lease_owner"]])).toEqual([
        ["delivered", null, null, null],
        ["pending", "The receiver answered 503.", null, null],
        ["ended", "The receiver answered 410 Gone.", "gone", null],
        ["failed", "Not sent.", null, null],
        // Left as the other worker holds it.
        ["pending", null, null, "the-other-worker"]
      ])
      expect(rows[0]!["delivered_at"]).toEqual(now)
      expect(rows[1]!["next_attempt_at"]).toEqual(new Date(now.getTime() + 5_000))
      expect(rows[4]!["attempts"]).toBe(2)
      expect(rows[4]!["lease_expires_at"]).toEqual(new Date(now.getTime() + 30_000))
    }).pipe(Effect.orDie))
})
