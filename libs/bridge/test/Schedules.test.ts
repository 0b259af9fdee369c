/**
 * The named retry policies, on the TestClock: post-call backoff grows with
 * bounded jitter, honours Retry-After up to five minutes and stops on every
 * failure that is not Transient; in-call operations get a time budget only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Option, TestClock } from "effect"
import type { BridgeError } from "../src/BridgeError.js"
import { Auth, Conflict, Permanent, transient } from "../src/BridgeError.js"
import * as Schedules from "../src/Schedules.js"
import * as Drive from "./support/Drive.js"

const operation = "leads.create" as const

/** Fails with `errorAt(n)` on attempt n, recording the TestClock time of each attempt. */
const attempts = (errorAt: (attempt: number) => BridgeError) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    const attempt: Effect.Effect<never, BridgeError> = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      times.push(now)
      return Effect.fail(errorAt(times.length))
    })
    const exit = yield* Drive.run(Effect.retry(attempt, Schedules.postCallRetry))
    const start = times[0] ?? 0
    return { exit, times: times.map((t) => t - start), delays: times.slice(1).map((t, i) => t - times[i]!) }
  })

const unavailable = () => transient({ operation, status: 503, message: "The bridge answered 503." })

describe("Schedules.postCallRetry", () => {
  it.effect("Errors: 429 or 5xx is transient — delays grow exponentially from 2 s and jitter stays within 0.8–1.2, each at most 5 minutes", () =>
    Effect.gen(function*() {
      const { delays, exit } = yield* attempts(unavailable)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(delays).toHaveLength(Schedules.POST_CALL_MAX_RETRIES)
      delays.forEach((delay, i) => {
        const base = Duration.toMillis(Schedules.POST_CALL_BASE_DELAY) * 2 ** i
        const cap = Duration.toMillis(Schedules.POST_CALL_MAX_DELAY)
        expect(delay).toBeGreaterThanOrEqual(Math.floor(Math.min(base * 0.8, cap)))
        expect(delay).toBeLessThanOrEqual(Math.ceil(Math.min(base * 1.2, cap)))
      })
      // Growth: every uncapped delay is longer than the one before it (×2 outweighs ±20% jitter).
      for (let i = 1; i < 7; i++) expect(delays[i]!).toBeGreaterThan(delays[i - 1]!)
    }))

  it.effect("Errors: Retry-After is honoured — the next attempt waits at least what the bridge asked (90 s)", () =>
    Effect.gen(function*() {
      const { delays } = yield* attempts((n) =>
        n === 1
          ? transient({ operation, status: 429, message: "429", retryAfter: Duration.seconds(90) })
          : new Conflict({ operation, status: 409, message: "stop" })
      )
      expect(delays).toEqual([90_000])
    }))

  it.effect("Limits: Retry-After honored up to 5 minutes — a Retry-After of one hour waits exactly 5 minutes", () =>
    Effect.gen(function*() {
      const asked = transient({ operation, status: 503, message: "503", retryAfter: Duration.hours(1) })
      expect(asked.retryAfter).toEqual(Option.some(Duration.minutes(5)))
      const { delays } = yield* attempts((n) => n === 1 ? asked : new Permanent({ operation, status: 400, kind: "rejected", message: "stop" }))
      expect(delays).toEqual([300_000])
    }))

  it.effect("Errors: 409 is permanent for the operation — no automatic retry", () =>
    Effect.gen(function*() {
      const { times } = yield* attempts(() => new Conflict({ operation, status: 409, message: "taken" }))
      expect(times).toEqual([0])
    }))

  it.effect("Errors: an API-key 401 requires corrected access — Auth is not retried", () =>
    Effect.gen(function*() {
      const { times } = yield* attempts(() => new Auth({ operation, status: 401, message: "refused" }))
      expect(times).toEqual([0])
    }))

  it.effect("Errors: other 4xx, redirects and invalid receipts are permanent — Permanent is not retried", () =>
    Effect.gen(function*() {
      const { times } = yield* attempts(() => new Permanent({ operation, status: 200, kind: "invalid_receipt", message: "bad" }))
      expect(times).toEqual([0])
    }))

  it.effect("postCallRetry: a transient failure then a permanent one stops at the permanent one", () =>
    Effect.gen(function*() {
      const { exit, times } = yield* attempts((n) =>
        n < 3 ? unavailable() : new Permanent({ operation, status: 422, kind: "rejected", message: "stop" })
      )
      expect(times).toHaveLength(3)
      expect(exit).toEqual(Exit.fail(new Permanent({ operation, status: 422, kind: "rejected", message: "stop" })))
    }))

  it.effect("postCallRetry: no retry starts after 30 minutes, even when every answer asks for 5 minutes", () =>
    Effect.gen(function*() {
      const { times } = yield* attempts(() =>
        transient({ operation, status: 503, message: "503", retryAfter: Duration.minutes(5) })
      )
      expect(times.length).toBeLessThan(Schedules.POST_CALL_MAX_RETRIES + 1)
      // The last retry started at or before the 30-minute mark.
      expect(times.at(-1)!).toBeLessThanOrEqual(Duration.toMillis(Schedules.POST_CALL_MAX_ELAPSED))
      expect(times.slice(1).every((t, i) => t - times[i]! === 300_000)).toBe(true)
    }))
})

describe("Schedules.inCallBudget", () => {
  it.effect("Errors rule 3: in-call operations are time-bounded — running out of the budget is a Transient timeout, not a wait", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Schedules.withinInCallBudget("appointments.create")(Effect.never))
      yield* TestClock.adjust(Duration.subtract(Schedules.inCallBudget, Duration.millis(1)))
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust(Duration.millis(1))
      const exit = yield* fiber.await
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(error?._tag).toBe("Transient")
      expect(error?.operation).toBe("appointments.create")
      expect(error?.status).toBeNull()
    }))

  it.effect("Errors rule 3: an in-call operation that answers within the budget is not delayed", () =>
    Effect.gen(function*() {
      const result = yield* Schedules.withinInCallBudget("contacts.search")(Effect.succeed("receipt"))
      expect(result).toBe("receipt")
    }))
})
