import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, TestClock } from "effect"
import { RateLimiter, layerWithPolicy } from "../src/RateLimiter.js"
import { ServicesLive } from "./support/Services.js"

describe("RateLimiter", () => {
  it.layer(ServicesLive)((it) => {
    it.effect("Limits: 60 requests per key per minute; the 61st is refused with the seconds left in the minute", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-01-01T00:00:00Z"))
        const first = yield* Effect.forEach(Array.from({ length: 60 }), () => limiter.hit("key:a"))
        expect(first.every((d) => d.allowed)).toBe(true)
        expect(first.map((d) => d.count)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1))
        yield* TestClock.adjust("15 seconds")
        const sixtyFirst = yield* limiter.hit("key:a")
        expect(sixtyFirst).toEqual({ allowed: false, count: 61, retryAfterSeconds: 45 })
        // Another subject has its own budget.
        expect((yield* limiter.hit("key:b")).allowed).toBe(true)
      }))

    it.effect("the next minute starts a fresh budget; Retry-After rounds up and is at least 1", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-01-02T00:00:00Z"))
        yield* Effect.forEach(Array.from({ length: 61 }), () => limiter.hit("key:c"))
        yield* TestClock.adjust(Duration.millis(59_500))
        expect(yield* limiter.hit("key:c")).toMatchObject({ allowed: false, retryAfterSeconds: 1 })
        yield* TestClock.adjust(Duration.millis(500))
        expect(yield* limiter.hit("key:c")).toEqual({ allowed: true, count: 1, retryAfterSeconds: 60 })
      }))

    it.effect("a replica whose clock lags counts into the newest window instead of resetting it", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-01-03T00:01:00Z"))
        yield* limiter.hit("key:d")
        yield* TestClock.setTime(Date.parse("2030-01-03T00:00:59Z"))
        expect(yield* limiter.hit("key:d")).toMatchObject({ allowed: true, count: 2 })
      }))

    it.effect("Limits: counting is exact under concurrency (200 concurrent requests on one key: 60 allowed)", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-01-04T00:00:00Z"))
        const decisions = yield* Effect.all(Array.from({ length: 200 }, () => limiter.hit("key:e")), {
          concurrency: "unbounded"
        })
        expect(decisions.map((d) => d.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
        expect(decisions.filter((d) => d.allowed)).toHaveLength(60)
      }))

    it.effect("another policy can be layered in", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-01-05T00:00:00Z"))
        expect((yield* limiter.hit("key:f")).allowed).toBe(true)
        expect(yield* limiter.hit("key:f")).toMatchObject({ allowed: false, retryAfterSeconds: 10 })
      }).pipe(Effect.provide(layerWithPolicy({ limit: 1, window: Duration.seconds(10) }).pipe(Layer.fresh))))
  })
})
