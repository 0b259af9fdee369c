/**
 * What a receiver's answers do to its subscription, end to end: the fan-out
 * writes deliveries, the worker POSTs them through the real safe egress to
 * real HTTPS receivers on loopback, on a real database (PGlite, or
 * PostgreSQL with DATABASE_URL). Auto-disable runs on the TestClock.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import type { EgressError, EgressResponse } from "@crm-relay/bridge"
import { Duration, Effect, Either, Fiber, HashMap, Layer, Logger, LogLevel, TestClock } from "effect"
import { Deliveries } from "../src/Deliveries.js"
import * as DeliveryWorker from "../src/DeliveryWorker.js"
import * as Recoveries from "../src/Recoveries.js"
import * as SubscriptionLifecycle from "../src/SubscriptionLifecycle.js"
import { Subscriptions } from "../src/Subscriptions.js"
import * as Harness from "./support/DeliveryHarness.js"

const { realisticNow } = Harness

/** Audit lines logged while `effect` runs: action and fields. */
const audited = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<Record<string, unknown>> = []
    const logger = Logger.make(({ annotations }) => {
      const record: Record<string, unknown> = {}
      for (const [key, value] of HashMap.toEntries(annotations)) record[key] = value
      if (record["log"] === "audit") lines.push(record)
    })
    const result = yield* effect.pipe(
      Effect.provide(Layer.merge(Logger.add(logger), Logger.minimumLogLevel(LogLevel.Info)))
    )
    return { result, lines }
  })

interface SubscriptionRow {
  readonly removed_at: Date | null
  readonly removed_reason: string | null
  readonly disabled_at: Date | null
  readonly disabled_reason: string | null
  readonly failing_since: Date | null
  readonly failure_window_count: number
}

const subscriptionRow = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<SubscriptionRow>`SELECT removed_at, removed_reason, disabled_at, disabled_reason, failing_since, failure_window_count
      FROM subscriptions WHERE id = ${id}`.pipe(Effect.map((rows) => rows[0]!), Effect.orDie))

const endReason = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ end_reason: string | null }>`SELECT end_reason FROM deliveries WHERE id = ${id}`.pipe(
      Effect.map((rows) => rows[0]!.end_reason),
      Effect.orDie
    ))

/** Runs `body` with a recovery worker beside it. */
const withRecoveries = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const worker = yield* Recoveries.run({ pollInterval: Duration.millis(200) }).pipe(Effect.fork)
    return yield* body.pipe(Effect.ensuring(Fiber.interrupt(worker)))
  })

const quiet = Layer.merge(Harness.layer, Logger.minimumLogLevel(process.env["DEBUG_LC"] ? LogLevel.Warning : LogLevel.None))
const policy: SubscriptionLifecycle.AutoDisablePolicy = { disableAfter: Duration.days(5), minFailures: 3 }

layer(quiet, { excludeTestServices: true })("Receiver lifecycle on the real clock", (it) => {
  it.effect("410 Gone removes the subscription at once: the delivery and the subscription's other pending deliveries end as `gone` (not retried, not failed); the next event queues nothing; DELETE /subscribe/{id} then finds it removed (\"An unknown id, an already removed id or another account's id gives 404.\")", () =>
    Effect.gen(function*() {
      const { main } = yield* Harness.Receivers
      main.script("/zap-deleted", [{ status: 410 }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/zap-deleted", "receiver.localhost"))
      // Queued before the worker starts: one is claimed at a time, so the others are pending when the 410 comes.
      const ids = [...(yield* Harness.lead(account.id)), ...(yield* Harness.lead(account.id)), ...(yield* Harness.lead(account.id))]
      const { lines } = yield* audited(Harness.withWorker(
        Effect.gen(function*() {
          yield* Harness.wake
          yield* Harness.eventually(Effect.map(Effect.forEach(ids, Harness.row), (rows) => rows.every((r) => r.status === "ended")))
        }),
        { concurrency: 1, batchSize: 1 }
      ))
      expect(main.received("/zap-deleted")).toHaveLength(1)
      for (const id of ids) {
        expect(yield* endReason(id)).toBe("gone")
        expect((yield* Harness.row(id)).last_error).toMatch(/410 Gone/)
      }
      const sent = main.received("/zap-deleted")[0]!.headers["webhook-id"]!
      expect(yield* Harness.attempts(sent)).toMatchObject([{ attempt: 1, status_code: 410, error_class: "gone", result: "ended" }])
      const subscription = yield* subscriptionRow(subscriptionId)
      expect(subscription.removed_at).not.toBeNull()
      expect(subscription.removed_reason).toBe("gone")
      expect(lines).toContainEqual(expect.objectContaining({
        action: "subscription.removed",
        actor: "system",
        subscription_id: subscriptionId,
        reason: "gone",
        deliveries_ended: 2
      }))
      expect(yield* Harness.lead(account.id)).toEqual([])
      expect(yield* (yield* Subscriptions).remove(account.id, subscriptionId)).toBe(false)
    }))

  it.effect("Delivery control: an answer carrying `webhook-delivery: abort-message` ends that one message, not retried and recorded as such; the subscription stays and its next event is delivered; a replay sends the message again; a 4xx without it is retried", () =>
    Effect.gen(function*() {
      const { main } = yield* Harness.Receivers
      main.script("/abort", [{ status: 422, headers: { "webhook-delivery": "Abort-Message" } }, { status: 200 }])
      main.script("/plain-4xx", [{ status: 422 }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/abort", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [aborted] = yield* Harness.lead(account.id)
        const row = yield* Harness.settled(aborted!, 1)
        expect(row.status).toBe("ended")
        expect(yield* endReason(aborted!)).toBe("aborted")
        expect(row.last_error).toBe("The receiver answered 422 with webhook-delivery: abort-message; this message is not retried.")
        expect(yield* Harness.attempts(aborted!)).toMatchObject([{ status_code: 422, error_class: "aborted", result: "ended" }])
        expect((yield* subscriptionRow(subscriptionId)).removed_at).toBeNull()
        const [next] = yield* Harness.lead(account.id)
        expect((yield* Harness.settled(next!, 1)).status).toBe("delivered")
        expect(main.received("/abort")).toHaveLength(2)
        // Replayed, an ended message is sent again and no longer carries its old reason.
        expect(yield* (yield* Deliveries).replay(aborted!)).toBe("queued")
        expect((yield* Harness.settled(aborted!, 2)).status).toBe("delivered")
        expect(yield* endReason(aborted!)).toBeNull()

        const other = yield* Harness.account("Other")
        yield* other.subscribe(main.url("/plain-4xx", "receiver.localhost"))
        const [retried] = yield* Harness.lead(other.id)
        const plain = yield* Harness.settled(retried!, 1)
        expect(plain.status).toBe("pending")
        expect(yield* Harness.attempts(retried!)).toMatchObject([{ status_code: 422, error_class: "client_error", result: "retry" }])
      }))
    }))

})

layer(quiet)("Receiver lifecycle on the TestClock", (it) => {
  it.effect("Auto-disable: the clock starts only when several deliveries failed within a day (2 failures, then one 25 h later: no clock; 3 within a day: the clock starts at the first)", () =>
    Effect.gen(function*() {
      const t0 = yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/flaky-day", [{ status: 503 }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/flaky-day", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        for (let i = 0; i < 2; i++) yield* Harness.settled((yield* Harness.lead(account.id))[0]!, 1)
        expect(yield* subscriptionRow(subscriptionId)).toMatchObject({ failing_since: null, failure_window_count: 2 })
        const later = t0 + Duration.toMillis(Duration.hours(25))
        yield* TestClock.setTime(later)
        yield* Harness.settled((yield* Harness.lead(account.id))[0]!, 1)
        expect(yield* subscriptionRow(subscriptionId)).toMatchObject({ failing_since: null, failure_window_count: 1 })
        for (let i = 0; i < 2; i++) yield* Harness.settled((yield* Harness.lead(account.id))[0]!, 1)
        const row = yield* subscriptionRow(subscriptionId)
        expect(row.failure_window_count).toBe(3)
        expect(row.failing_since?.getTime()).toBe(later)
        expect(row.disabled_at).toBeNull()
      }), { autoDisable: policy, ...Harness.ownSchedules })
    }))

  it.effect("Auto-disable: a subscription whose every attempt failed for 5 days is disabled, not deleted (no new deliveries queued, pending ones end as `disabled`, when and why recorded, an audit line); enable is one action, and recover replays what ended meanwhile", () =>
    Effect.gen(function*() {
      const t0 = yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/dark", [{ status: 503 }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/dark", "receiver.localhost"))
      const ids: Array<string> = []
      const { lines } = yield* audited(Harness.withWorker(Effect.gen(function*() {
        for (let i = 0; i < 3; i++) {
          const [id] = yield* Harness.lead(account.id)
          ids.push(id!)
          yield* Harness.settled(id!, 1)
        }
        expect((yield* subscriptionRow(subscriptionId)).failing_since?.getTime()).toBe(t0)
        // Just short of 5 days: every retry due meanwhile fails (the first three run out of attempts), nothing is disabled.
        yield* TestClock.setTime(t0 + Duration.toMillis(Duration.days(5)) - 60_000)
        for (let i = 0; i < 2; i++) {
          const [id] = yield* Harness.lead(account.id)
          ids.push(id!)
          yield* Harness.settled(id!, 1)
        }
        expect((yield* subscriptionRow(subscriptionId)).disabled_at).toBeNull()
        // Past 5 days: the next failure disables it, and every pending delivery ends.
        yield* TestClock.setTime(t0 + Duration.toMillis(Duration.days(5)) + 3_600_000)
        yield* Harness.eventually(Effect.map(Effect.forEach(ids, Harness.row), (rows) => rows.every((r) => r.status !== "pending")))
      }), { autoDisable: policy, concurrency: 1, batchSize: 1, ...Harness.ownSchedules }))
      const disabled = yield* subscriptionRow(subscriptionId)
      expect(disabled.removed_at).toBeNull()
      expect(disabled.disabled_at!.getTime()).toBeGreaterThanOrEqual(t0 + Duration.toMillis(Duration.days(5)))
      expect(disabled.disabled_reason).toBe("Every attempt failed for 5d (last: The receiver answered 503.)")
      // The last two were pending when it was disabled; the first three had failed for good or were pending too.
      for (const id of ids.slice(3)) expect(yield* endReason(id)).toBe("disabled")
      for (const id of ids.slice(0, 3)) expect(["failed", "ended"]).toContain((yield* Harness.row(id)).status)
      expect(lines).toContainEqual(expect.objectContaining({ action: "subscription.disabled", actor: "system", subscription_id: subscriptionId }))
      expect(yield* Harness.lead(account.id)).toEqual([])

      const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
      const recoveries = yield* Recoveries.Recoveries
      // Disabled: recover is refused (enable first), and nothing is queued.
      expect((yield* Effect.flip(recoveries.start(account.id, subscriptionId, { since: new Date(t0) })))._tag).toBe("SubscriptionDisabled")
      expect(yield* lifecycle.enable(account.id, subscriptionId)).toBe("enabled")
      expect(yield* lifecycle.enable(account.id, subscriptionId)).toBe("already_enabled")
      expect(yield* subscriptionRow(subscriptionId)).toMatchObject({ disabled_at: null, failing_since: null, failure_window_count: 0 })

      main.script("/dark", [{ status: 200 }])
      const before = main.received("/dark").length
      yield* Harness.withWorker(withRecoveries(Effect.gen(function*() {
        const [fresh] = yield* Harness.lead(account.id)
        expect((yield* Harness.settled(fresh!, 1)).status).toBe("delivered")
        const recovery = yield* recoveries.start(account.id, subscriptionId, { since: new Date(t0) })
        expect(recovery).toMatchObject({ status: "pending", total: 5, queued: 0 })
        yield* Harness.eventually(Effect.map(Effect.forEach(ids, Harness.row), (rows) => rows.every((r) => r.status === "delivered")))
        yield* Harness.eventually(
          Effect.map(recoveries.find(account.id, recovery.id), (found) => found._tag === "Some" && found.value.status === "done")
        )
        const progress = yield* recoveries.find(account.id, recovery.id)
        expect(progress).toMatchObject({ value: { total: 5, queued: 5, skipped: 0, status: "done" } })
      })))
      // Recovered deliveries keep their id: the same webhook-id the receiver saw before.
      const resent = main.received("/dark").slice(before).map((r) => r.headers["webhook-id"])
      for (const id of ids) expect(resent).toContain(id)
    }))

  it.effect("Auto-disable still counts the days since the origin began failing (issue 40): while its origin is held, a failed probe disables its subscription once the origin has failed for 5 days, though the subscription's own clock never started", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      const quietOne = yield* account.subscribe(main.url("/held-behind-others", "receiver.localhost"))
      const stillYoung = yield* account.subscribe(main.url("/held-a-day", "receiver.localhost"))
      const days = (n: number) => new Date(now - Duration.toMillis(Duration.days(n)))
      // Its origin failing for a day only: no disable.
      expect(yield* SubscriptionLifecycle.noteFailure(stillYoung, true, policy, "The receiver answered 503.", days(1))).toBe(false)
      expect((yield* subscriptionRow(stillYoung)).disabled_at).toBeNull()
      // Failing for 5 days and an hour: this one failure disables it.
      expect(yield* SubscriptionLifecycle.noteFailure(quietOne, true, policy, "The receiver answered 503.", new Date(days(5).getTime() - 3_600_000)))
        .toBe(true)
      const row = yield* subscriptionRow(quietOne)
      expect(row.failing_since).toBeNull()
      expect(row.disabled_at?.getTime()).toBe(now)
      expect(row.disabled_reason).toBe("Every attempt failed for 5d (last: The receiver answered 503.)")
    }))

  it.effect("Recover replays only the window: failed or ended deliveries created from `since` to `until`, none before or after, none delivered or pending", () =>
    Effect.gen(function*() {
      const t0 = yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/window", [{ status: 422, headers: { "webhook-delivery": "abort-message" } }])
      const account = yield* Harness.account()
      const subscriptionId = yield* account.subscribe(main.url("/window", "receiver.localhost"))
      const at = (hours: number) => t0 + Duration.toMillis(Duration.hours(hours))
      const byHour = new Map<number, string>()
      yield* Harness.withWorker(Effect.gen(function*() {
        for (const hour of [0, 2, 4, 6]) {
          yield* TestClock.setTime(at(hour))
          const [id] = yield* Harness.lead(account.id)
          byHour.set(hour, id!)
          yield* Harness.settled(id!, 1)
        }
      }))
      const recoveries = yield* Recoveries.Recoveries
      main.script("/window", [{ status: 200 }])
      yield* Harness.withWorker(withRecoveries(Effect.gen(function*() {
        const recovery = yield* recoveries.start(account.id, subscriptionId, { since: new Date(at(1)), until: new Date(at(5)) })
        expect(recovery.total).toBe(2)
        yield* Harness.eventually(Effect.map(
          recoveries.find(account.id, recovery.id),
          (found) => found._tag === "Some" && found.value.status === "done"
        ))
        yield* Harness.settled(byHour.get(2)!, 2)
        yield* Harness.settled(byHour.get(4)!, 2)
      })))
      expect((yield* Harness.row(byHour.get(2)!)).status).toBe("delivered")
      expect((yield* Harness.row(byHour.get(4)!)).status).toBe("delivered")
      expect((yield* Harness.row(byHour.get(0)!)).status).toBe("ended")
      expect((yield* Harness.row(byHour.get(6)!)).status).toBe("ended")
    }))

  it.effect("Bad input: a recover window in the future or reversed, an unknown or another account's subscription, a removed one → a clear typed error, and nothing is queued", () =>
    Effect.gen(function*() {
      const t0 = yield* realisticNow
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      const other = yield* Harness.account("Other")
      const subscriptionId = yield* account.subscribe(main.url("/bad-input", "receiver.localhost"))
      const foreign = yield* other.subscribe(main.url("/bad-input", "receiver.localhost"))
      const recoveries = yield* Recoveries.Recoveries
      const refused = (accountId: string, id: string, window: { since: Date; until?: Date }) =>
        Effect.flip(recoveries.start(accountId, id, window))
      const future = yield* refused(account.id, subscriptionId, { since: new Date(t0 + 60_000) })
      expect(future).toMatchObject({ _tag: "InvalidRecoverWindow" })
      expect(future.message).toMatch(/^since \(.+\) is in the future; recover replays what already happened\.$/)
      const untilFuture = yield* refused(account.id, subscriptionId, { since: new Date(t0 - 60_000), until: new Date(t0 + 60_000) })
      expect(untilFuture.message).toMatch(/until .* is in the future/)
      const reversed = yield* refused(account.id, subscriptionId, { since: new Date(t0 - 1000), until: new Date(t0 - 2000) })
      expect(reversed.message).toMatch(/^The window is reversed: until \(.+\) is before since \(.+\)\.$/)
      const invalid = yield* refused(account.id, subscriptionId, { since: new Date("nonsense") })
      expect(invalid._tag).toBe("InvalidRecoverWindow")
      const unknown = yield* refused(account.id, "00000000-0000-4000-8000-000000000000", { since: new Date(t0 - 1000) })
      expect(unknown).toMatchObject({ _tag: "SubscriptionNotFound" })
      expect(unknown.message).toMatch(/check the id and the account/)
      expect((yield* refused(account.id, foreign, { since: new Date(t0 - 1000) }))._tag).toBe("SubscriptionNotFound")
      expect((yield* refused(account.id, "not-a-uuid", { since: new Date(t0 - 1000) }))._tag).toBe("SubscriptionNotFound")
      yield* (yield* Subscriptions).remove(account.id, subscriptionId)
      expect((yield* refused(account.id, subscriptionId, { since: new Date(t0 - 1000) }))._tag).toBe("SubscriptionNotFound")
      const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
      expect((yield* Effect.flip(lifecycle.enable(account.id, foreign)))._tag).toBe("SubscriptionNotFound")
      expect((yield* Effect.flip(lifecycle.disable(account.id, subscriptionId, "x")))._tag).toBe("SubscriptionNotFound")
      const sql = yield* SqlClient.SqlClient
      const stored = yield* sql<{ n: number | string }>`SELECT count(*) AS n FROM subscription_recoveries
        WHERE account_id IN (${account.id}, ${other.id})`.pipe(Effect.orDie)
      expect(Number(stored[0]!.n)).toBe(0)
      expect(yield* subscriptionRow(foreign)).toMatchObject({ disabled_at: null, removed_at: null })
    }))
})

describe("Receiver lifecycle: classification", () => {
  const answer = (status: number, headers: Record<string, string> = {}) =>
    Either.right<EgressResponse>({ status, headers, body: new Uint8Array(), durationMs: 1 }) as Either.Either<EgressResponse, EgressError>

  it("410 ends as gone whatever else the answer says; abort-message is one token of webhook-delivery, any case; a 2xx carrying it is still delivered", () => {
    expect(DeliveryWorker.classify(answer(410, { "webhook-delivery": "abort-message" }), 0)).toMatchObject({ _tag: "Ended", reason: "gone" })
    expect(DeliveryWorker.classify(answer(400, { "webhook-delivery": "foo, ABORT-MESSAGE" }), 0)).toMatchObject({ _tag: "Ended", reason: "aborted" })
    expect(DeliveryWorker.classify(answer(503, { "webhook-delivery": "abort-message" }), 0)).toMatchObject({ _tag: "Ended", reason: "aborted" })
    expect(DeliveryWorker.classify(answer(204, { "webhook-delivery": "abort-message" }), 0)).toMatchObject({ _tag: "Delivered" })
    expect(DeliveryWorker.classify(answer(400, { "webhook-delivery": "abort-messages" }), 0)).toMatchObject({ _tag: "Failed" })
  })
})
