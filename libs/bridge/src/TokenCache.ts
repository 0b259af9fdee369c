/**
 * The process-wide OAuth access-token cache (Authentication rule 3). Entries
 * are keyed by a digest of tenant, account, endpoint, configuration and
 * credentials, kept only as long as `OAuth.tokenCacheSeconds` allows, and
 * fetched once per key at a time. Losing it is harmless: a fresh grant follows.
 */
import { Clock, Effect, Metric, Redacted } from "effect"
import type { BridgeError } from "./BridgeError.js"

/** A granted token and how many seconds it may be cached (0: not at all). */
export interface Grant {
  readonly token: Redacted.Redacted<string>
  readonly cacheSeconds: number
}

/** OAuth token cache lookups by result: `hit` (a valid cached token) or `miss` (a grant was asked for) (metric). */
export const lookups = Metric.counter("crm_relay_oauth_token_cache_lookups_total", {
  description: "OAuth access-token cache lookups by result: hit (a cached token was used) or miss (a new grant was requested).",
  incremental: true
})
/** The lookup counter of each result, `hit` and `miss`: the only series it has, each exported from the start. */
export const lookupsByResult = {
  hit: Metric.tagged(lookups, "result", "hit"),
  miss: Metric.tagged(lookups, "result", "miss")
} as const
const { hit, miss } = lookupsByResult

interface Slot {
  readonly lock: Effect.Semaphore
  entry: { readonly token: Redacted.Redacted<string>; readonly expiresAt: number } | undefined
}

/** Access tokens by cache key. */
export class TokenCache extends Effect.Service<TokenCache>()("@crm-relay/bridge/TokenCache", {
  sync: () => {
    const slots = new Map<string, Slot>()
    const slotOf = (key: string): Slot => {
      const existing = slots.get(key)
      if (existing !== undefined) return existing
      const slot: Slot = { lock: Effect.unsafeMakeSemaphore(1), entry: undefined }
      slots.set(key, slot)
      return slot
    }
    const valid = (slot: Slot, now: number) =>
      slot.entry !== undefined && now < slot.entry.expiresAt ? slot.entry.token : undefined

    // Under the slot's lock: asks for a grant and keeps it when its lifetime allows.
    const grantInto = <E>(slot: Slot, grant: Effect.Effect<Grant, E>, now: number) =>
      Effect.map(grant, ({ cacheSeconds, token }) => {
        slot.entry = cacheSeconds > 0 ? { token, expiresAt: now + cacheSeconds * 1000 } : undefined
        return token
      })

    return {
      /** A cached token for `key` when one is still valid, otherwise the token of a new grant. */
      get: <E = BridgeError>(key: string, grant: Effect.Effect<Grant, E>): Effect.Effect<Redacted.Redacted<string>, E> => {
        const slot = slotOf(key)
        return slot.lock.withPermits(1)(
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const cached = valid(slot, now)
            return cached !== undefined
              ? Effect.as(Metric.increment(hit), cached)
              : Effect.zipRight(Metric.increment(miss), grantInto(slot, grant, now))
          })
        )
      },
      /**
       * After a bridge refused `rejected`: a fresh grant — or the token another
       * request already got after `rejected` was refused, which is just as fresh.
       */
      renew: <E = BridgeError>(
        key: string,
        rejected: Redacted.Redacted<string>,
        grant: Effect.Effect<Grant, E>
      ): Effect.Effect<Redacted.Redacted<string>, E> => {
        const slot = slotOf(key)
        return slot.lock.withPermits(1)(
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const cached = valid(slot, now)
            if (cached !== undefined && Redacted.value(cached) !== Redacted.value(rejected)) return Effect.as(Metric.increment(hit), cached)
            slot.entry = undefined
            return Effect.zipRight(Metric.increment(miss), grantInto(slot, grant, now))
          })
        )
      },
      /** Forgets every token (for tests and credential rotation). */
      clear: Effect.sync(() => slots.clear())
    }
  }
}) {}
