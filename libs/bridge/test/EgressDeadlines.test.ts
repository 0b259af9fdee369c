import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { makeDeadlines } from "../src/internal/egress/Deadlines.js"

describe("Egress deadlines (one sweeper per Layer, on the Effect clock)", () => {
  it.scoped("Limits: an armed deadline expires exactly when its timeout has passed, not before", () =>
    Effect.gen(function*() {
      const deadlines = yield* makeDeadlines(10_000)
      const expired: Array<string> = []
      deadlines.arm(() => expired.push("a"))
      yield* TestClock.adjust("9999 millis")
      expect(expired).toEqual([])
      yield* TestClock.adjust("1 millis")
      expect(expired).toEqual(["a"])
    }))

  it.scoped("deadlines expire in the order they were armed, each at its own time", () =>
    Effect.gen(function*() {
      const deadlines = yield* makeDeadlines(1000)
      const expired: Array<string> = []
      deadlines.arm(() => expired.push("a"))
      yield* TestClock.adjust("300 millis")
      deadlines.arm(() => expired.push("b"))
      yield* TestClock.adjust("700 millis")
      expect(expired).toEqual(["a"])
      yield* TestClock.adjust("299 millis")
      expect(expired).toEqual(["a"])
      yield* TestClock.adjust("1 millis")
      expect(expired).toEqual(["a", "b"])
    }))

  it.scoped("a disarmed deadline never fires, and later ones still do", () =>
    Effect.gen(function*() {
      const deadlines = yield* makeDeadlines(1000)
      const expired: Array<string> = []
      const disarmA = deadlines.arm(() => expired.push("a"))
      yield* TestClock.adjust("100 millis")
      deadlines.arm(() => expired.push("b"))
      disarmA()
      yield* TestClock.adjust("1000 millis")
      expect(expired).toEqual(["b"])
    }))

  it.scoped("after going idle, a new deadline is swept again", () =>
    Effect.gen(function*() {
      const deadlines = yield* makeDeadlines(500)
      const expired: Array<string> = []
      deadlines.arm(() => expired.push("a"))()
      yield* TestClock.adjust("2 seconds")
      deadlines.arm(() => expired.push("b"))
      yield* TestClock.adjust("499 millis")
      expect(expired).toEqual([])
      yield* TestClock.adjust("1 millis")
      expect(expired).toEqual(["b"])
    }))
})
