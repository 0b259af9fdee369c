/**
 * The webhook retry schedule on the TestClock: the delays, their jitter, the
 * 60 s floor after a timeout or 429, Retry-After, the end of the schedule,
 * and `delayAfter` (what the worker uses) agreeing with the schedule.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"
import * as DeliverySchedule from "../src/DeliverySchedule.js"

const serverError: DeliverySchedule.DeliveryFailure = { retryable: true, wait: Duration.zero }

/** Runs `effect` to completion, jumping the TestClock to each sleep as it comes. */
const drive = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    for (let step = 0; step < 10_000; step++) {
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return done.value
      const sleeps = yield* TestClock.sleeps()
      if (Chunk.isNonEmpty(sleeps)) yield* TestClock.setTime(Math.min(...Chunk.toReadonlyArray(sleeps)))
    }
    return yield* Effect.dieMessage("drive: did not finish")
  })

/** Fails every time with `failureAt(n)`, retried on `deliveryRetry`; returns the gaps between attempts. */
const gaps = (failureAt: (attempt: number) => DeliverySchedule.DeliveryFailure) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      times.push(now)
      return Effect.fail(failureAt(times.length))
    })
    const exit = yield* drive(Effect.retry(attempt, DeliverySchedule.deliveryRetry))
    expect(Exit.isFailure(exit)).toBe(true)
    return times.slice(1).map((t, i) => t - times[i]!)
  })

const within20 = (actual: number, base: Duration.Duration) => {
  expect(actual).toBeGreaterThanOrEqual(Math.floor(Duration.toMillis(base) * 0.8))
  expect(actual).toBeLessThanOrEqual(Math.ceil(Duration.toMillis(base) * 1.2))
}

describe("DeliverySchedule.deliveryRetry", () => {
  it.effect("Retry policy: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h with ±20 % jitter, then no more (8 attempts)", () =>
    Effect.gen(function*() {
      const delays = yield* gaps(() => serverError)
      expect(delays).toHaveLength(7)
      expect(DeliverySchedule.MAX_ATTEMPTS).toBe(8)
      delays.forEach((delay, i) => within20(delay, DeliverySchedule.DELIVERY_DELAYS[i]!))
      expect(DeliverySchedule.DELIVERY_DELAYS.map(Duration.toMillis)).toEqual([
        5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000
      ])
    }))

  it.effect("Retry policy: the jitter really varies (not always the base delay) and stays within ±20 % over many runs", () =>
    Effect.gen(function*() {
      const firsts: Array<number> = []
      for (let run = 0; run < 40; run++) {
        const delay = yield* DeliverySchedule.delayAfter(1, serverError)
        firsts.push(Duration.toMillis(Option.getOrThrow(delay)))
      }
      firsts.forEach((delay) => within20(delay, Duration.seconds(5)))
      expect(new Set(firsts).size).toBeGreaterThan(5)
    }))

  it.effect("Retry policy: at least 60 s after a timeout or a 429 (instead of 5 s)", () =>
    Effect.gen(function*() {
      const delays = yield* gaps((n) =>
        n <= 2 ? { retryable: true, wait: DeliverySchedule.MIN_WAIT_AFTER_TIMEOUT_OR_429 } : { retryable: false, wait: Duration.zero }
      )
      // The first gap would be 4–6 s; the second (5 min) is already longer than 60 s.
      expect(delays[0]).toBe(60_000)
      within20(delays[1]!, Duration.minutes(5))
      expect(delays).toHaveLength(2)
    }))

  it.effect("Retry policy: Retry-After is honoured when it asks for more than the schedule, never shortens it", () =>
    Effect.gen(function*() {
      const delays = yield* gaps((n) =>
        n === 1
          ? { retryable: true, wait: Duration.minutes(20) }
          : n === 2
          ? { retryable: true, wait: Duration.seconds(1) }
          : { retryable: false, wait: Duration.zero }
      )
      expect(delays[0]).toBe(1_200_000)
      within20(delays[1]!, Duration.minutes(5))
    }))

  it.effect("Retry policy: a failure that retrying cannot fix (refused target) is never retried", () =>
    Effect.gen(function*() {
      expect(yield* gaps(() => ({ retryable: false, wait: Duration.zero }))).toEqual([])
      expect(yield* DeliverySchedule.delayAfter(1, { retryable: false, wait: Duration.zero })).toEqual(Option.none())
    }))

  it.effect("delayAfter follows the schedule per attempt and ends after the 8th attempt", () =>
    Effect.gen(function*() {
      for (let attempt = 1; attempt <= 7; attempt++) {
        const delay = yield* DeliverySchedule.delayAfter(attempt, serverError)
        within20(Duration.toMillis(Option.getOrThrow(delay)), DeliverySchedule.DELIVERY_DELAYS[attempt - 1]!)
      }
      expect(yield* DeliverySchedule.delayAfter(8, serverError)).toEqual(Option.none())
      expect(yield* DeliverySchedule.delayAfter(9, serverError)).toEqual(Option.none())
      const afterTimeout = yield* DeliverySchedule.delayAfter(1, { retryable: true, wait: Duration.seconds(60) })
      expect(afterTimeout).toEqual(Option.some(Duration.seconds(60)))
    }))
})

describe("DeliverySchedule.parseRetryAfter", () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0)
  it("Retry-After: delta-seconds and HTTP-dates, bounded to 10 hours; unreadable values are ignored", () => {
    const ms = (value: string | undefined) => Option.map(DeliverySchedule.parseRetryAfter(value, now), Duration.toMillis)
    expect(ms("120")).toEqual(Option.some(120_000))
    expect(ms(" 0 ")).toEqual(Option.some(0))
    expect(ms(new Date(now + 90_000).toUTCString())).toEqual(Option.some(90_000))
    expect(ms(new Date(now - 90_000).toUTCString())).toEqual(Option.some(0))
    expect(ms("999999")).toEqual(Option.some(36_000_000))
    expect(ms(undefined)).toEqual(Option.none())
    expect(ms("-5")).toEqual(Option.none())
    expect(ms("1.5")).toEqual(Option.none())
    expect(ms("soon")).toEqual(Option.none())
  })
})
