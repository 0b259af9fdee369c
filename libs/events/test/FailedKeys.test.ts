import { describe, expect, it } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import * as Statement from "@effect/sql/Statement"
import { Context, Duration, Effect, Layer, Option, TestClock } from "effect"
import { FailedKeys, layerWithPolicy } from "../src/FailedKeys.js"

/** Two replicas' limiters (each its own cache) over one database. */
const Replicas = Effect.all([
  Layer.build(Layer.fresh(layerWithPolicy({ limit: 3, window: Duration.minutes(1) }))),
  Layer.build(Layer.fresh(layerWithPolicy({ limit: 3, window: Duration.minutes(1) })))
]).pipe(Effect.map((contexts) => contexts.map((context) => Context.get(context, FailedKeys))))

describe("FailedKeys", () => {
  it.layer(TestDatabase.layer)((it) => {
    it.scoped("past the limit an address is refused until its minute ends (Retry-After the seconds left, at least 1), then counts afresh", () =>
      Effect.gen(function*() {
        const [limiter] = yield* Replicas
        yield* TestClock.setTime(Date.parse("2030-02-01T00:00:00Z"))
        for (let i = 1; i <= 3; i++) expect(yield* limiter!.fail("203.0.113.1")).toMatchObject({ allowed: true, count: i })
        expect(Option.isNone(yield* limiter!.refused("203.0.113.1"))).toBe(true)
        yield* TestClock.adjust("20 seconds")
        expect(yield* limiter!.fail("203.0.113.1")).toEqual({ allowed: false, count: 4, retryAfterSeconds: 40 })
        expect(yield* limiter!.refused("203.0.113.1")).toEqual(Option.some(40))
        // Another address has its own count.
        expect(Option.isNone(yield* limiter!.refused("203.0.113.2"))).toBe(true)
        yield* TestClock.adjust(Duration.millis(39_500))
        expect(yield* limiter!.refused("203.0.113.1")).toEqual(Option.some(1))
        yield* TestClock.adjust(Duration.millis(500))
        expect(Option.isNone(yield* limiter!.refused("203.0.113.1"))).toBe(true)
        expect(yield* limiter!.fail("203.0.113.1")).toMatchObject({ allowed: true, count: 1 })
      }), { timeout: 60_000 })

    it.scoped("replicas share the count: failures on two replicas add up, and each learns the verdict at its next failure", () =>
      Effect.gen(function*() {
        const [a, b] = yield* Replicas
        yield* TestClock.setTime(Date.parse("2030-02-02T00:00:00Z"))
        yield* a!.fail("198.51.100.7")
        yield* b!.fail("198.51.100.7")
        yield* a!.fail("198.51.100.7")
        expect((yield* b!.fail("198.51.100.7")).allowed).toBe(false)
        expect(Option.isSome(yield* b!.refused("198.51.100.7"))).toBe(true)
        // A has not asked since: its cache does not know yet; its next failure tells it.
        expect(Option.isNone(yield* a!.refused("198.51.100.7"))).toBe(true)
        expect((yield* a!.fail("198.51.100.7")).allowed).toBe(false)
        expect(Option.isSome(yield* a!.refused("198.51.100.7"))).toBe(true)
      }), { timeout: 60_000 })

    it.scoped("keys told invalid without the database (forged, malformed, known revoked) are counted by this replica alone: no query, and past the limit the address is refused", () =>
      Effect.gen(function*() {
        const [limiter, other] = yield* Replicas
        yield* TestClock.setTime(Date.parse("2030-02-03T00:00:00Z"))
        let statements = 0
        const counted = Statement.withTransformer((statement) => Effect.sync(() => (statements++, statement)))
        for (let i = 1; i <= 3; i++) expect(yield* counted(limiter!.failHere("192.0.2.9"))).toMatchObject({ allowed: true, count: i })
        expect(yield* counted(limiter!.failHere("192.0.2.9"))).toEqual({ allowed: false, count: 4, retryAfterSeconds: 60 })
        expect(yield* limiter!.refused("192.0.2.9")).toEqual(Option.some(60))
        expect(statements).toBe(0)
        // Nothing was shared: the other replica counts its own.
        expect(Option.isNone(yield* other!.refused("192.0.2.9"))).toBe(true)
      }), { timeout: 60_000 })

    it.scoped("a revoked key is remembered (bounded), so its retries need no query", () =>
      Effect.gen(function*() {
        const [limiter] = yield* Replicas
        const tagged = (i: number) => `crk_${String(i).padStart(64, "k")}`
        expect(limiter!.revoked.has(tagged(-1))).toBe(false)
        limiter!.revoked.add(tagged(-1))
        expect(limiter!.revoked.has(tagged(-1))).toBe(true)
        // Past a hundred thousand, the oldest is forgotten first.
        for (let i = 0; i < 100_000; i++) limiter!.revoked.add(tagged(i))
        expect(limiter!.revoked.has(tagged(-1))).toBe(false)
        expect(limiter!.revoked.has(tagged(99_999))).toBe(true)
      }))
  })
})
