/**
 * The Event API's limits count in fixed windows of the clock's minute: the
 * per-key rate limit and the failed-key limit of an address. A test that
 * needs a limit reached and still in force a moment later must not cross a
 * minute meanwhile (the counts start over, and the refusal it waits for
 * never comes, or an answer it expects refused is a 200).
 */
import { Effect } from "effect"

/** Returns at once when at least `needMs` (30 s unless given) of the current minute are left; else waits for the next minute. */
export const withinOne = (needMs = 30_000): Effect.Effect<void> =>
  Effect.suspend(() => {
    const left = 60_000 - (Date.now() % 60_000)
    return left >= needMs ? Effect.void : Effect.sleep(left + 50)
  })
