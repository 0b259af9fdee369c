/**
 * Exchange deadlines on the Effect clock without a fiber per exchange.
 *
 * `Effect.timeout` races two forked fibers per call, which on loopback costs
 * more than the exchange itself. Every exchange of one Layer has the same
 * timeout, so deadlines expire in the order they were armed: one sweeper fiber
 * sleeps until the oldest armed deadline, expires what is due, and waits on a
 * latch while nothing is armed. Being on the Effect clock, `TestClock` drives
 * it in tests.
 */
import { Effect } from "effect"
import type { Scope } from "effect"

/** Arms deadlines for exchanges. */
export interface Deadlines {
  /**
   * Calls `onExpire` once the deadline has passed, unless the returned
   * function (disarm) is called first.
   */
  readonly arm: (onExpire: () => void) => () => void
}

interface Armed {
  readonly at: number
  readonly onExpire: () => void
}

/** Deadlines of `timeoutMs` each, swept until the scope closes. */
export const makeDeadlines = (timeoutMs: number): Effect.Effect<Deadlines, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    // Insertion order is deadline order, since every entry gets the same timeout.
    const armed = new Set<Armed>()
    const busy = yield* Effect.makeLatch(false)

    const expireDue = () => {
      const now = clock.unsafeCurrentTimeMillis()
      for (const entry of armed) {
        if (entry.at > now) return
        armed.delete(entry)
        entry.onExpire()
      }
    }

    const sweep = Effect.suspend(() => {
      const oldest = armed.values().next()
      if (oldest.done === true) {
        busy.unsafeClose()
        return Effect.void
      }
      const wait = oldest.value.at - clock.unsafeCurrentTimeMillis()
      return Effect.zipRight(wait > 0 ? Effect.sleep(wait) : Effect.void, Effect.sync(expireDue))
    })

    yield* busy.await.pipe(Effect.zipRight(sweep), Effect.forever, Effect.forkScoped)

    return {
      arm: (onExpire) => {
        const entry: Armed = { at: clock.unsafeCurrentTimeMillis() + timeoutMs, onExpire }
        armed.add(entry)
        if (armed.size === 1) busy.unsafeOpen()
        return () => {
          armed.delete(entry)
        }
      }
    }
  })
