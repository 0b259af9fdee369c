/**
 * Webhook delivery end to end inside libs/events: the fan-out writes
 * deliveries, the worker claims them and POSTs through the real safe
 * egress to real HTTPS receivers on loopback, on a real database (PGlite,
 * or PostgreSQL with DATABASE_URL). Retry timing runs on the TestClock;
 * signatures and concurrency on the real clock.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Either, Fiber, HashMap, Layer, Logger, LogLevel, Redacted, TestClock } from "effect"
import { MAX_BODY_BYTES } from "@crm-relay/bridge"
import { gzipSync } from "node:zlib"
import { Webhook } from "standardwebhooks"
import { Deliveries } from "../src/Deliveries.js"
import * as DeliverySchedule from "../src/DeliverySchedule.js"
import * as DeliveryWorker from "../src/DeliveryWorker.js"
import { SigningSecrets } from "../src/SigningSecrets.js"
import { Subscriptions } from "../src/Subscriptions.js"
import * as WebhookSigner from "../src/WebhookSigner.js"
import * as Harness from "./support/DeliveryHarness.js"

const { realisticNow } = Harness

const millisBetween = (later: Date, earlier: Date) => later.getTime() - earlier.getTime()

layer(Harness.layer)("Webhook delivery on the TestClock", (it) => {
  it.effect("Retry policy: a failing receiver is retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (each within ±20 %), then dead-lettered; webhook-id is stable across retries; every attempt is logged", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/down", [{ status: 503 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/down", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        for (let n = 1; n <= DeliverySchedule.MAX_ATTEMPTS; n++) {
          const row = yield* Harness.settled(id!, n)
          const logged = yield* Harness.attempts(id!)
          if (n === DeliverySchedule.MAX_ATTEMPTS) break
          const base = Duration.toMillis(DeliverySchedule.DELIVERY_DELAYS[n - 1]!)
          const delay = millisBetween(row.next_attempt_at, logged[n - 1]!.started_at)
          expect(delay).toBeGreaterThanOrEqual(Math.floor(base * 0.8))
          expect(delay).toBeLessThanOrEqual(Math.ceil(base * 1.2))
          expect(row.status).toBe("pending")
          // Not a moment early: one millisecond before, nothing is sent.
          yield* TestClock.setTime(row.next_attempt_at.getTime() - 1)
          yield* Harness.pause(30)
          expect(main.received("/down")).toHaveLength(n)
          yield* TestClock.setTime(row.next_attempt_at.getTime())
        }
        const final = yield* Harness.row(id!)
        expect(final.status).toBe("failed")
        expect(final.last_error).toBe("Gave up after 8 attempts: The receiver answered 503.")
        const requests = main.received("/down")
        expect(requests).toHaveLength(8)
        expect(new Set(requests.map((r) => r.headers["webhook-id"]))).toEqual(new Set([id]))
        const stamps = requests.map((r) => Number(r.headers["webhook-timestamp"]))
        for (let i = 1; i < stamps.length; i++) expect(stamps[i]!).toBeGreaterThan(stamps[i - 1]!)
        const logged = yield* Harness.attempts(id!)
        expect(logged.map((a) => [a.attempt, a.status_code, a.error_class, a.result])).toEqual([
          ...[1, 2, 3, 4, 5, 6, 7].map((n) => [n, 503, "server_error", "retry"]),
          [8, 503, "server_error", "failed"]
        ])
        // Attempts are spaced as the schedule says (started_at on the TestClock): 27 h 35 min 5 s ± 20 %.
        const total = DeliverySchedule.DELIVERY_DELAYS.reduce((sum, d) => sum + Duration.toMillis(d), 0)
        const span = millisBetween(logged[7]!.started_at, logged[0]!.started_at)
        expect(span).toBeGreaterThanOrEqual(Math.floor(0.8 * total))
        expect(span).toBeLessThanOrEqual(Math.ceil(1.2 * total))
      }))
    }))

  it.effect("Retry policy: at least 60 s after a timeout (the receiver answered after the deadline), and the attempt records the timeout", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/slow", [{ status: 200, delayMs: Duration.toMillis(Harness.TEST_DEADLINE) + 1500 }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/slow", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        const row = yield* Harness.settled(id!, 1)
        const [attempt] = yield* Harness.attempts(id!)
        expect(attempt).toMatchObject({ status_code: null, error_class: "timeout", result: "retry" })
        expect(millisBetween(row.next_attempt_at, attempt!.started_at)).toBe(60_000)
        expect(row.status).toBe("pending")
      })).pipe(Harness.withDeadline(Harness.TEST_DEADLINE))
    }))

  it.effect("Retry policy: at least 60 s after a 429, even when its Retry-After asks for 1 s", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/busy", [{ status: 429, headers: { "retry-after": "1" } }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/busy", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        const row = yield* Harness.settled(id!, 1)
        const [attempt] = yield* Harness.attempts(id!)
        expect(attempt).toMatchObject({ status_code: 429, error_class: "rate_limited", result: "retry" })
        expect(millisBetween(row.next_attempt_at, attempt!.started_at)).toBe(60_000)
      }))
    }))

  it.effect("Retry policy: Retry-After is honoured — 120 s (delta-seconds), an HTTP-date 10 minutes ahead, and a huge value bounded to 10 hours", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/ra-seconds", [{ status: 503, headers: { "retry-after": "120" } }])
      main.script("/ra-date", [{ status: 503, headers: { "retry-after": new Date(now + 600_000).toUTCString() } }])
      main.script("/ra-huge", [{ status: 429, headers: { "retry-after": "999999" } }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/ra-seconds", "receiver.localhost"))
      yield* account.subscribe(main.url("/ra-date", "receiver.localhost"))
      yield* account.subscribe(main.url("/ra-huge", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        const waits = new Map<string, number>()
        for (const id of ids) {
          const row = yield* Harness.settled(id, 1)
          const [attempt] = yield* Harness.attempts(id)
          waits.set(new URL(yield* Harness.targetOf(id)).pathname, millisBetween(row.next_attempt_at, attempt!.started_at))
        }
        expect(waits.get("/ra-seconds")).toBe(120_000)
        // The HTTP-date has whole seconds; the wait is measured from the attempt's end.
        expect(waits.get("/ra-date")).toBeGreaterThan(598_000)
        expect(waits.get("/ra-date")).toBeLessThanOrEqual(600_000)
        expect(waits.get("/ra-huge")).toBe(Duration.toMillis(DeliverySchedule.MAX_RETRY_AFTER))
      }), Harness.ownSchedules)
    }))

  it.effect("Delivery rule: a 3xx is a failure and is not followed — the redirect target receives nothing; 4xx is retried on the schedule; 2xx is success", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main, second } = yield* Harness.Receivers
      const elsewhere = second.url("/elsewhere", "second.localhost")
      main.script("/moved", [
        { status: 302, headers: { location: elsewhere } },
        { status: 308, headers: { location: elsewhere } },
        { status: 404 },
        { status: 204 }
      ])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/moved", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const [id] = yield* Harness.lead(account.id)
        for (let n = 1; n <= 3; n++) {
          const row = yield* Harness.settled(id!, n)
          expect(row.status).toBe("pending")
          yield* TestClock.setTime(row.next_attempt_at.getTime())
        }
        const row = yield* Harness.settled(id!, 4)
        expect(row.status).toBe("delivered")
        expect(row.delivered_at).not.toBeNull()
        expect(row.last_error).toBeNull()
        expect((yield* Harness.attempts(id!)).map((a) => [a.status_code, a.error_class, a.result])).toEqual([
          [302, "redirect", "retry"],
          [308, "redirect", "retry"],
          [404, "client_error", "retry"],
          [204, null, "delivered"]
        ])
        expect(second.received()).toEqual([])
      }))
    }))

  it.effect("Delivery rule: private, loopback and metadata receivers never receive anything; the attempt records why and nothing is retried", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { ipv6, loopback, main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      const targets = {
        loopbackName: loopback.url("/hook", "loopback.example"),
        loopbackLiteral: loopback.url("/hook", "127.0.0.2"),
        ipv6Name: ipv6.url("/hook", "v6.example"),
        ipv6Literal: ipv6.url("/hook", "[::1]"),
        metadataName: "https://metadata.example/latest/meta-data/",
        metadataLiteral: "https://169.254.169.254/latest/meta-data/",
        privateName: "https://private.example/hook",
        plainHttp: `http://receiver.localhost:${main.port}/plain`
      }
      for (const url of Object.values(targets)) yield* account.subscribe(url)
      yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        expect(ids).toHaveLength(8)
        const outcomes = yield* Effect.forEach(ids, (id) =>
          Effect.gen(function*() {
            const row = yield* Harness.settled(id, 1)
            const logged = yield* Harness.attempts(id)
            return { row, logged }
          }))
        for (const { logged, row } of outcomes) {
          expect(row.status).toBe("failed")
          expect(row.attempts).toBe(1)
          expect(logged).toHaveLength(1)
          expect(logged[0]).toMatchObject({ status_code: null, error_class: "refused", result: "failed" })
          expect(row.last_error).toBe(logged[0]!.error)
        }
        const sql = yield* SqlClient.SqlClient
        const byTarget = new Map(
          (yield* sql<{ target_url: string; last_error: string }>`SELECT target_url, last_error FROM deliveries
            WHERE account_id = ${account.id}`).map((r) => [r.target_url, r.last_error])
        )
        expect(byTarget.get(targets.loopbackName)).toContain("loopback")
        expect(byTarget.get(targets.loopbackLiteral)).toContain("loopback")
        expect(byTarget.get(targets.ipv6Name)).toContain("loopback")
        expect(byTarget.get(targets.ipv6Literal)).toContain("loopback")
        expect(byTarget.get(targets.metadataName)).toContain("metadata")
        expect(byTarget.get(targets.metadataLiteral)).toContain("metadata")
        expect(byTarget.get(targets.privateName)).toContain("private-use")
        expect(byTarget.get(targets.plainHttp)).toContain("only https:// URLs are allowed")
        // Give any stray connection time to arrive: none does.
        yield* Harness.pause(200)
        expect(loopback.received()).toEqual([])
        expect(ipv6.received()).toEqual([])
        expect(main.received("/plain")).toEqual([])
      }))
    }))

  it.effect("Fan-out rule 4: duplicate subscriptions get duplicate deliveries, each with its own webhook-id", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/dup", "receiver.localhost"))
      yield* account.subscribe(main.url("/dup", "receiver.localhost"), "all")
      yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        for (const id of ids) yield* Harness.settled(id, 1)
        expect(new Set(main.received("/dup").map((r) => r.headers["webhook-id"]))).toEqual(new Set(ids))
      }))
    }))

  it.effect("Replay: a delivered or failed delivery is queued again with the same webhook-id; a pending one is left alone", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/replay", "receiver.localhost"))
      const deliveries = yield* Deliveries
      yield* Harness.withWorker(Effect.gen(function*() {
        const [delivered] = yield* Harness.lead(account.id)
        yield* Harness.settled(delivered!, 1)
        expect(yield* deliveries.replay(delivered!)).toBe("queued")
        yield* Harness.settled(delivered!, 2)
        const [failed] = yield* Harness.lead(account.id)
        yield* Harness.settled(failed!, 1)
        // As if the schedule had ended: failed for good.
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE deliveries SET status = 'failed', last_error = 'Gave up' WHERE id = ${failed!}`
        expect(yield* deliveries.replay(failed!)).toBe("queued")
        const row = yield* Harness.settled(failed!, 2)
        expect(row.status).toBe("delivered")
        const ids = main.received("/replay").map((r) => r.headers["webhook-id"])
        expect(ids).toEqual([delivered, delivered, failed, failed])
        expect((yield* Harness.attempts(delivered!)).map((a) => [a.attempt, a.result])).toEqual([[1, "delivered"], [1, "delivered"]])
        expect(yield* deliveries.replay("00000000-0000-4000-8000-000000000000")).toBe("not_found")
        expect(yield* deliveries.replay("not-a-uuid")).toBe("not_found")
      }))
      // Without a worker, a fresh delivery stays pending: replaying it changes nothing.
      const [waiting] = yield* Harness.lead(account.id)
      expect(yield* deliveries.replay(waiting!)).toBe("already_pending")
      yield* (yield* SqlClient.SqlClient)`UPDATE deliveries SET status = 'failed' WHERE id = ${waiting!}`
    }))

  it.effect("A subscription removed after the fan-out receives nothing: the delivery fails with that reason", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      const subscription = yield* account.subscribe(main.url("/gone", "receiver.localhost"))
      const [id] = yield* Harness.lead(account.id)
      yield* (yield* Subscriptions).remove(account.id, subscription)
      yield* Harness.withWorker(Effect.gen(function*() {
        yield* Harness.wake
        const row = yield* Harness.settled(id!, 1)
        expect(row).toMatchObject({ status: "failed", last_error: "The subscription was removed; nothing was sent." })
        expect(main.received("/gone")).toEqual([])
      }))
    }))
})

/** Collects log records whose message is `message`, with their annotations. */
const collectLogs = (message: string) => {
  const lines: Array<Record<string, unknown>> = []
  const logger = Logger.make(({ annotations, logLevel, message: logged }) => {
    const text = Array.isArray(logged) ? logged.join(" ") : String(logged)
    if (text !== message) return
    const record: Record<string, unknown> = { level: logLevel.label }
    for (const [key, value] of HashMap.toEntries(annotations)) record[key] = value
    lines.push(record)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const quiet = Layer.merge(Harness.layer, Logger.minimumLogLevel(LogLevel.None))

layer(quiet, { excludeTestServices: true })("Webhook delivery on the real clock", (it) => {
  it.effect("Standard Webhooks: the signature verifies with the standardwebhooks package and fails with a wrong secret; the body is exactly the stored JSON; a 2xx is delivered and logged", () =>
    Effect.gen(function*() {
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      const other = yield* Harness.account("Other")
      yield* account.subscribe(main.url("/signed?token=abc", "receiver.localhost"))
      const logs = collectLogs("Webhook delivery attempt")
      const before = Math.floor(Date.now() / 1000)
      const [id] = yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        yield* Harness.settled(ids[0]!, 1)
        return ids
      })).pipe(Effect.provide(Layer.merge(logs.layer, Logger.minimumLogLevel(LogLevel.Info))))
      const row = yield* Harness.row(id!)
      expect(row.status).toBe("delivered")
      expect(row.delivered_at).not.toBeNull()
      const [request] = main.received("/signed")
      expect(request!.method).toBe("POST")
      // The query of the receiver URL is sent (allowQuery).
      expect(request!.path).toBe("/signed?token=abc")
      expect(request!.headers["content-type"]).toBe("application/json")
      expect(request!.headers["user-agent"]).toBe(WebhookSigner.USER_AGENT)
      expect(request!.headers["webhook-id"]).toBe(id)
      expect(Number(request!.headers["webhook-timestamp"])).toBeGreaterThanOrEqual(before)
      expect(request!.body).toBe(row.body)
      const event = JSON.parse(request!.body)
      expect(event).toMatchObject({ id, event: "lead", booked: false, contact: Harness.contact })

      const secrets = yield* SigningSecrets
      const secret = Redacted.value(yield* secrets.get(account.id))
      expect(new Webhook(secret).verify(request!.body, request!.headers)).toEqual(event)
      const wrong = Redacted.value(yield* secrets.get(other.id))
      expect(() => new Webhook(wrong).verify(request!.body, request!.headers)).toThrow()
      expect(() => new Webhook(secret).verify(request!.body.replace("Ada", "Eve"), request!.headers)).toThrow()

      const [attempt] = yield* Harness.attempts(id!)
      expect(attempt).toMatchObject({ attempt: 1, status_code: 200, error_class: null, error: null, result: "delivered" })
      expect(attempt!.duration_ms).toBeGreaterThanOrEqual(0)
      expect(logs.lines).toHaveLength(1)
      expect(logs.lines[0]).toMatchObject({
        level: "INFO",
        delivery_id: id,
        account_id: account.id,
        attempt: 1,
        target_host: `receiver.localhost:${main.port}`,
        status_code: 200,
        error_class: null,
        result: "delivered"
      })
      // The log line names the host only: no path, query, payload or secret.
      const text = JSON.stringify(logs.lines[0])
      expect(text).not.toContain("token=abc")
      expect(text).not.toContain("Ada")
      expect(text).not.toContain(secret.slice(6))
    }))

  it.effect("Several workers share the deliveries and never double-deliver: 3 workers, 150 deliveries, each webhook-id received exactly once", () =>
    Effect.gen(function*() {
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/many", "receiver.localhost"))
      const ids: Array<string> = []
      for (let i = 0; i < 150; i++) ids.push(...(yield* Harness.lead(account.id)))
      const workers = yield* Effect.forEach([1, 2, 3], () =>
        DeliveryWorker.run({ concurrency: 8, pollInterval: Duration.millis(200) }).pipe(Effect.fork))
      yield* Harness.eventually(Effect.sync(() => main.received("/many").length >= ids.length), Duration.minutes(3))
      yield* Harness.pause(200)
      yield* Effect.forEach(workers, Fiber.interrupt)
      const counts = new Map<string, number>()
      for (const r of main.received("/many")) counts.set(r.headers["webhook-id"]!, (counts.get(r.headers["webhook-id"]!) ?? 0) + 1)
      expect(counts.size).toBe(ids.length)
      expect([...counts.values()].every((n) => n === 1)).toBe(true)
      const sql = yield* SqlClient.SqlClient
      const statuses = yield* sql<{ status: string; n: number }>`SELECT status, count(*)::int AS n FROM deliveries
        WHERE account_id = ${account.id} GROUP BY status`
      expect(statuses).toEqual([{ status: "delivered", n: 150 }])
    }))

  it.effect("Fair queues: \"One receiver origin may hold at most a bounded share of a worker's slots — default a quarter of the concurrency\" — behind 40 queued events of a receiver that never answers, another account's events are delivered at once; the silent origin holds 2 of 8 slots", () =>
    Effect.gen(function*() {
      const { main, second } = yield* Harness.Receivers
      // Accepts the request and never answers (within the test).
      main.script("/silent", [{ status: 200, delayMs: 600_000 }])
      const silent = yield* Harness.account("Silent")
      yield* silent.subscribe(main.url("/silent", "receiver.localhost"))
      const healthy = yield* Harness.account("Healthy")
      yield* healthy.subscribe(second.url("/healthy", "second.localhost"))
      for (let i = 0; i < 40; i++) yield* Harness.lead(silent.id)
      yield* Harness.withWorker(Effect.gen(function*() {
        yield* Harness.eventually(Effect.sync(() => main.received("/silent").length >= 2))
        const ids: Array<string> = []
        for (let i = 0; i < 5; i++) ids.push(...(yield* Harness.lead(healthy.id)))
        yield* Harness.eventually(Effect.sync(() => second.received("/healthy").length >= ids.length), Duration.minutes(2))
        expect(new Set(second.received("/healthy").map((r) => r.headers["webhook-id"]))).toEqual(new Set(ids))
        // Still only the quarter of the slots: the other 38 wait for the silent receiver's own slots.
        expect(main.received("/silent")).toHaveLength(2)
        const sql = yield* SqlClient.SqlClient
        const leased = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries
          WHERE account_id = ${silent.id} AND lease_owner IS NOT NULL`
        expect(leased[0]!.n).toBe(2)
      }), { concurrency: 8, pollInterval: Duration.millis(200) })
    }))
})

// The egress deadline of the contract (10 s): these answers must be judged on what they say, not on a busy machine's speed.
layer(Harness.layerWith(Duration.seconds(10)))("Webhook delivery: what a 2xx may carry", (it) => {
  it.effect("Delivery rule: \"A 2xx is success whatever its body\" — a receiver answering 2xx with a Content-Encoding or a body over 1 MiB has accepted the event: delivered once, not retried; the attempt log keeps no remote header text", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const { main } = yield* Harness.Receivers
      main.script("/gzip", [{ status: 200, headers: { "content-encoding": "gzip" }, body: gzipSync(Buffer.alloc(8 * MAX_BODY_BYTES, 0x20)) }])
      main.script("/large", [{ status: 202, body: Buffer.alloc(2 * MAX_BODY_BYTES, 0x20) }])
      main.script("/coded-failure", [{ status: 503, headers: { "content-encoding": "x-remote-marker-3f9a" } }])
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/gzip", "receiver.localhost"))
      yield* account.subscribe(main.url("/large", "receiver.localhost"))
      yield* account.subscribe(main.url("/coded-failure", "receiver.localhost"))
      yield* Harness.withWorker(Effect.gen(function*() {
        const ids = yield* Harness.lead(account.id)
        const byPath = new Map<string, { row: Harness.Row; logged: ReadonlyArray<Harness.AttemptRow> }>()
        for (const id of ids) {
          const row = yield* Harness.settled(id, 1)
          byPath.set(new URL(yield* Harness.targetOf(id)).pathname, { row, logged: yield* Harness.attempts(id) })
        }
        for (const [path, status] of [["/gzip", 200], ["/large", 202]] as const) {
          const { logged, row } = byPath.get(path)!
          expect([row.status, row.attempts, row.last_error]).toEqual(["delivered", 1, null])
          expect(logged.map((a) => [a.status_code, a.error_class, a.error, a.result])).toEqual([[status, null, null, "delivered"]])
        }
        const failing = byPath.get("/coded-failure")!
        expect(failing.logged.map((a) => [a.status_code, a.error_class, a.error, a.result])).toEqual([
          [503, "server_error", "The receiver answered 503.", "retry"]
        ])
        expect(JSON.stringify(failing)).not.toContain("marker")
        // Accepted once: no second request arrives.
        yield* Harness.pause(200)
        expect(main.received("/gzip")).toHaveLength(1)
        expect(main.received("/large")).toHaveLength(1)
      }))
    }))
})

describe("DeliveryWorker.classify", () => {
  const response = (status: number, headers: Record<string, string> = {}) => ({
    status,
    headers,
    body: new Uint8Array(),
    durationMs: 1
  })
  const classify = (status: number, headers?: Record<string, string>) =>
    DeliveryWorker.classify(Either.right(response(status, headers)), 0)

  it("Delivery rule: 2xx is success, 1xx/3xx/4xx/5xx are failures retried on the schedule (410 Gone ends the subscription instead)", () => {
    expect(classify(200)._tag).toBe("Delivered")
    expect(classify(299)._tag).toBe("Delivered")
    expect(classify(410)._tag).toBe("Ended")
    for (const status of [101, 301, 304, 400, 404, 500, 599]) {
      const c = classify(status)
      expect(c._tag).toBe("Failed")
      if (c._tag === "Failed") expect(c.failure.retryable).toBe(true)
    }
  })
})
