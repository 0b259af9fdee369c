/**
 * Runs a forked effect to completion under the TestClock: whenever it sleeps,
 * time jumps to the earliest wake-up; while it waits on real I/O, the driver
 * yields a few real milliseconds.
 */
import { Chunk, Effect, Exit, Fiber, Option, TestClock } from "effect"

const realPause = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 2)))

/** Drives `fiber` (at most `maxSteps` clock jumps or pauses) and returns its exit. */
export const drive = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, maxSteps = 20_000): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.gen(function*() {
    for (let step = 0; step < maxSteps; step++) {
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return done.value
      const sleeps = yield* TestClock.sleeps()
      if (Chunk.isNonEmpty(sleeps)) {
        yield* TestClock.setTime(Math.min(...Chunk.toReadonlyArray(sleeps)))
      } else {
        yield* realPause
      }
    }
    yield* Fiber.interrupt(fiber)
    return Exit.die(new Error(`drive: the fiber did not finish within ${maxSteps} steps`))
  })

/** Forks `effect`, drives it under the TestClock, and returns its exit. */
export const run = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.flatMap(Effect.fork(effect), (fiber) => drive(fiber))
