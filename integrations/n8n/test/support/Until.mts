/** Waiting on a condition of a real server: polled with real timers until it holds, within a bound against a hang. */
import { Duration, Effect, Option } from "effect"
import { Eventually } from "@crm-relay/testing"

/** Polls `probe` every `every` until it answers Some; dies naming `what` when it has not within `within`. */
export const until = <A, E, R>(
  what: string,
  probe: Effect.Effect<Option.Option<A>, E, R>,
  options: { readonly every?: number; readonly within?: Duration.DurationInput } = {}
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const within = Duration.decode(options.within ?? Duration.minutes(5))
    const deadline = Date.now() + Duration.toMillis(within)
    while (Date.now() < deadline) {
      const found = yield* probe
      if (Option.isSome(found)) return found.value
      yield* Eventually.pause(options.every ?? 250)
    }
    return yield* Effect.dieMessage(`${what} did not happen within ${Duration.format(within)}`)
  })
