/**
 * Knowing that a listener (a job runner's LISTEN, a test's own stream) is
 * live before a test relies on a notification reaching it: the listener's
 * stream is tapped, and the test pokes the channel until the listener hears
 * a poke. No bet that LISTEN took effect within some milliseconds.
 */
import { Duration, Effect, Stream } from "effect"
import { HANG_BOUND, pause } from "./Eventually.js"

/** How long one poke may stay unheard before the next is sent (not a bound: pokes go on until `within`). */
const REPOKE_MILLIS = 250

/** A probe over the listeners whose streams went through its `tap`. */
export interface ListenProbe {
  /** The stream, counting each element it delivers as heard. */
  readonly tap: <A, E, R>(stream: Stream.Stream<A, E, R>) => Stream.Stream<A, E, R>
  /** How many elements the tapped streams have delivered so far. */
  readonly heard: () => number
  /**
   * Runs `poke` (a notification on the listened channel) until a tapped
   * stream hears something after it; dies when none has within `within`.
   */
  readonly hears: <E, R>(poke: Effect.Effect<void, E, R>, within?: Duration.DurationInput) => Effect.Effect<void, E, R>
}

/** A new probe. */
export const make = (): ListenProbe => {
  let heard = 0
  const count = Effect.sync(() => {
    heard++
  })
  return {
    tap: (stream) => Stream.tap(stream, () => count),
    heard: () => heard,
    hears: (poke, within = HANG_BOUND) =>
      Effect.gen(function*() {
        const deadline = Date.now() + Duration.toMillis(within)
        while (Date.now() < deadline) {
          const before = heard
          yield* poke
          const repoke = Math.min(Date.now() + REPOKE_MILLIS, deadline)
          while (heard === before && Date.now() < repoke) yield* pause(10)
          if (heard > before) return
        }
        return yield* Effect.dieMessage("ListenProbe: no listener heard the channel in time")
      })
  }
}
