/**
 * Waiting on real time in tests that may run on the TestClock: database and
 * network I/O proceed while the TestClock stands still, so these wait with
 * the process's own timers and never with the Effect Clock.
 */
import { Duration, Effect } from "effect"

/**
 * How long a condition may take before a test gives up: a bound against a
 * hang, never a measure of speed (a loaded two-core machine runs many times
 * slower than a quiet one).
 */
export const HANG_BOUND: Duration.Duration = Duration.minutes(2)

/** A few real milliseconds. */
export const pause = (millis = 5): Effect.Effect<void> =>
  Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

/** Polls `check` every 10 real milliseconds until it holds; dies when it has not within `within`. */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  within: Duration.DurationInput = HANG_BOUND
): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(within)
    while (Date.now() < deadline) {
      if (yield* check) return
      yield* pause(10)
    }
    return yield* Effect.dieMessage("eventually: the condition did not hold in time")
  })
