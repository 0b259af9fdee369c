import { describe, expect, it } from "@effect/vitest"
import { type BridgeError, Conflict, Schedules, Transient } from "@crm-relay/bridge"
import { Duration, Effect, Option, Schedule } from "effect"
import { nextDelay } from "../src/CrmPush/Retry.js"

const transient = (retryAfter?: Duration.Duration) =>
  new Transient({ operation: "leads.create", status: 503, message: "The bridge answered 503.", retryAfter: Option.fromNullable(retryAfter) })

const delayOf = (failures: number, error: BridgeError, elapsed = Duration.zero) =>
  Effect.map(nextDelay(Schedules.postCallRetry, failures, error, elapsed), Option.map(Duration.toMillis))

describe("CrmPush retry plan (postCallRetry, persisted)", () => {
  it.effect("the first retry waits about 2 s (exponential from 2 s, jitter 0.8–1.2)", () =>
    Effect.gen(function*() {
      const first = Option.getOrThrow(yield* delayOf(1, transient()))
      expect(first).toBeGreaterThanOrEqual(1600)
      expect(first).toBeLessThanOrEqual(2400)
      const third = Option.getOrThrow(yield* delayOf(3, transient()))
      expect(third).toBeGreaterThanOrEqual(6400)
      expect(third).toBeLessThanOrEqual(9600)
    }))

  it.effect("each delay is at most 5 minutes", () =>
    Effect.gen(function*() {
      expect(Option.getOrThrow(yield* delayOf(10, transient()))).toBeLessThanOrEqual(300_000)
    }))

  it.effect("Errors: \"Retry-After is bounded to five minutes\" and never waited less than asked", () =>
    Effect.gen(function*() {
      expect(Option.getOrThrow(yield* delayOf(1, transient(Duration.seconds(90))))).toBe(90_000)
      expect(Option.getOrThrow(yield* delayOf(1, transient(Duration.minutes(5))))).toBe(300_000)
    }))

  it.effect("the schedule ends after 10 retries: the 11th failure is dead-lettered", () =>
    Effect.gen(function*() {
      expect(Option.isSome(yield* delayOf(10, transient()))).toBe(true)
      expect(Option.isNone(yield* delayOf(11, transient()))).toBe(true)
    }))

  it.effect("no retry starts once 30 minutes have passed since the first attempt", () =>
    Effect.gen(function*() {
      expect(Option.isSome(yield* delayOf(2, transient(), Duration.minutes(29)))).toBe(true)
      expect(Option.isNone(yield* delayOf(2, transient(), Duration.minutes(31)))).toBe(true)
    }))

  it.effect("Errors: 409 is \"Permanent for the operation; no automatic retry\"", () =>
    Effect.gen(function*() {
      const conflict = new Conflict({ operation: "leads.create", status: 409, message: "The bridge answered 409." })
      expect(Option.isNone(yield* delayOf(1, conflict))).toBe(true)
    }))

  it.effect("a short schedule substituted by tests is followed the same way", () =>
    Effect.gen(function*() {
      const short = Schedule.spaced(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(2)))
      expect(Option.map(yield* nextDelay(short, 1, transient(), Duration.zero), Duration.toMillis)).toEqual(Option.some(50))
      expect(Option.isSome(yield* nextDelay(short, 2, transient(), Duration.zero))).toBe(true)
      expect(Option.isNone(yield* nextDelay(short, 3, transient(), Duration.zero))).toBe(true)
    }))
})
