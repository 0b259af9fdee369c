/**
 * Runs a forked effect to completion under the TestClock: whenever it sleeps,
 * time jumps to the earliest wake-up; while it waits on real I/O, the driver
 * yields a few real milliseconds, for as long as a wait may take before it is
 * taken for a hang (however slow the machine), not for a number of polls.
 */
import { Eventually } from "@crm-relay/testing"
import { Chunk, Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"

const realPause = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 2)))

/** Drives `fiber` (at most `maxSteps` clock jumps; each real wait bounded by Eventually.HANG_BOUND) and returns its exit. */
export const drive = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, maxSteps = 20_000): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.gen(function*() {
    let jumps = 0
    let waitingSince = Date.now()
    while (jumps < maxSteps && Date.now() - waitingSince < Duration.toMillis(Eventually.HANG_BOUND)) {
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return done.value
      const sleeps = yield* TestClock.sleeps()
      if (Chunk.isNonEmpty(sleeps)) {
        yield* TestClock.setTime(Math.min(...Chunk.toReadonlyArray(sleeps)))
        jumps++
        waitingSince = Date.now()
      } else {
        yield* realPause
      }
    }
    yield* Fiber.interrupt(fiber)
    return Exit.die(new Error(`drive: the fiber did not finish (${jumps} clock jumps, then no progress in real time)`))
  })

/** Forks `effect`, drives it under the TestClock, and returns its exit. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.flatMap(Effect.fork(effect), (fiber) => drive(fiber))
