/**
 * The failed-authentication limit per client address: after `limit` requests
 * with an invalid key in a minute from one address, every request from it is
 * refused with 429 until the window ends — without a database query.
 *
 * The count is shared by the replicas (one `rate_limits` row per address,
 * counted by the same upsert as the per-key limit), so N failures spread over
 * replicas are N. The verdict "refused until T" is then cached in this
 * replica's memory: refused requests cost a map lookup, and each replica
 * learns the shared verdict at its next failed key from that address (one
 * query), so a flood costs the database at most `limit` + one query per
 * replica per window and address. Failures arriving together (a burst of
 * concurrent requests, all past the cached verdict before the first is
 * counted) are counted by the replica before their query too: past `limit` + 1
 * of them in a window the shared count is over the limit whatever the other
 * replicas did, and the rest are refused without a query.
 *
 * Keys told invalid without the database (forged or malformed, see KeyTags, or
 * remembered as revoked) are counted by this replica alone (`failHere`): a
 * flood of them costs no query at all. A tagged key the database refused is
 * remembered (`revoked`), so its retries cost none either; each replica learns
 * it at most once. The verdict refuses only keys that are not valid: callers
 * let a tagged key that is not remembered as revoked through, and a key issued
 * before tags that this replica saw authenticate (`validLegacy`).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Metric, Option } from "effect"
import { createHash } from "node:crypto"
import * as RateLimiter from "./RateLimiter.js"

/** Requests refused with 429 by the failed-key limit (metric). */
export const refusals = Metric.counter("crm_relay_failed_key_refusals_total", {
  description: "Event API requests refused with 429 because their client address sent too many invalid keys this minute.",
  incremental: true
})

/** How many failed keys an address may send per window. */
export class FailedKeyPolicy extends Context.Reference<FailedKeyPolicy>()("@crm-relay/events/FailedKeyPolicy", {
  defaultValue: (): RateLimiter.RateLimitPolicy => ({ limit: 30, window: Duration.minutes(1) })
}) {}

/** The rate-limit subject of a client address. */
export const subject = (address: string): string => `failed-key:${address}`

/** Addresses remembered as refused at most; past it the oldest verdict is forgotten (its replica asks the database again). */
const MAX_CACHED = 100_000

/** Revoked keys (and valid keys of the old form) remembered at most; past it the oldest is forgotten. */
const MAX_REVOKED = 100_000

/** A tagged key's last characters: its whole tag, which no one without the secret can match, so it names the key. */
const TAG_CHARS = 22

/** Counts failed keys per client address and refuses the addresses over the limit. */
export class FailedKeys extends Effect.Service<FailedKeys>()("@crm-relay/events/FailedKeys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const policy = yield* FailedKeyPolicy
    const windowMillis = Duration.toMillis(policy.window)
    // Address → end of the window its refusal holds for (epoch millis).
    const refusedUntil = new Map<string, number>()

    // Address → this replica's failures in the window starting at `window` (epoch millis), counted before their query.
    const started = new Map<string, { window: number; count: number }>()
    const startFailure = (address: string, window: number): number => {
      const entry = started.get(address)
      if (entry !== undefined && entry.window === window) return ++entry.count
      started.delete(address)
      if (started.size >= MAX_CACHED) started.delete(started.keys().next().value!)
      started.set(address, { window, count: 1 })
      return 1
    }

    const remember = (address: string, until: number) => {
      refusedUntil.delete(address)
      if (refusedUntil.size >= MAX_CACHED) refusedUntil.delete(refusedUntil.keys().next().value!)
      refusedUntil.set(address, until)
    }

    // The tags of keys the database refused (disabled, or gone with their account): a key is never re-enabled.
    // Only the tag is kept, not the rest of the secret.
    const revokedKeys = new Set<string>()

    // Digests of keys issued before tags that authenticated here: only the database can tell such a key, so
    // one seen valid is let through a refused address (a revoked one costs one lookup, then is dropped).
    const validLegacyKeys = new Set<string>()
    const legacyDigest = (key: string) => createHash("sha256").update(key).digest("base64")

    const refusedAt = (address: string, now: number): number | undefined => {
      const until = refusedUntil.get(address)
      if (until === undefined) return undefined
      if (until <= now) {
        refusedUntil.delete(address)
        return undefined
      }
      return Math.max(1, Math.ceil((until - now) / 1000))
    }

    return {
      policy,
      /** Seconds until `address` may try again, when it is refused at `now` (epoch millis): a map lookup, for callers outside Effect. */
      refusedAt,
      /** Seconds until `address` may try again, when it is refused now (no query). */
      refused: (address: string) => Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullable(refusedAt(address, now))),
      /** Tagged keys (whose tag matched) known to be revoked: their tries cost no query. */
      revoked: {
        has: (key: string): boolean => revokedKeys.has(key.slice(-TAG_CHARS)),
        add: (key: string): void => {
          if (revokedKeys.size >= MAX_REVOKED) revokedKeys.delete(revokedKeys.values().next().value!)
          revokedKeys.add(key.slice(-TAG_CHARS))
        }
      },
      /** Keys issued before tags that authenticated on this replica, by digest. */
      validLegacy: {
        has: (key: string): boolean => validLegacyKeys.has(legacyDigest(key)),
        add: (key: string): void => {
          const digest = legacyDigest(key)
          if (validLegacyKeys.has(digest)) return
          if (validLegacyKeys.size >= MAX_REVOKED) validLegacyKeys.delete(validLegacyKeys.values().next().value!)
          validLegacyKeys.add(digest)
        },
        delete: (key: string): void => {
          validLegacyKeys.delete(legacyDigest(key))
        }
      },
      /** Counts one failed key of `address` in this replica only (no query); the decision for it. */
      failHere: (address: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const window = RateLimiter.windowStart(policy, now)
          const mine = startFailure(address, window.getTime())
          if (mine > policy.limit) remember(address, window.getTime() + windowMillis)
          return RateLimiter.decide(policy, now, mine, window)
        }),
      /** Counts one failed key of `address` (shared by the replicas); the decision for it. */
      fail: (address: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const window = RateLimiter.windowStart(policy, now)
          const mine = startFailure(address, window.getTime())
          if (mine > policy.limit + 1) {
            remember(address, window.getTime() + windowMillis)
            return RateLimiter.decide(policy, now, mine, window)
          }
          const rows = yield* Effect.orDie(RateLimiter.hitStatement(sql, subject(address), window))
          const row = rows[0]!
          const decision = RateLimiter.decide(policy, now, row.count, row.window_start)
          if (!decision.allowed) remember(address, row.window_start.getTime() + windowMillis)
          return decision
        }).pipe(Effect.withSpan("FailedKeys.fail", { captureStackTrace: false }))
    }
  })
}) {}

/** `FailedKeys` with another policy (settings, tests). */
export const layerWithPolicy = (policy: RateLimiter.RateLimitPolicy): Layer.Layer<FailedKeys, never, SqlClient.SqlClient> =>
  FailedKeys.Default.pipe(Layer.provide(Layer.succeed(FailedKeyPolicy, policy)))
