/**
 * Fixed-window rate limiting counted in PostgreSQL, so the limit holds
 * across replicas: one row per subject, bumped by a single atomic upsert per
 * request (the row lock of `ON CONFLICT DO UPDATE` makes concurrent counts
 * exact). Time comes from Effect's `Clock`; a replica whose clock lags counts
 * into the newest window instead of resetting it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Metric } from "effect"

/** Requests refused with 429 by the per-key limit (metric). */
export const refusals = Metric.counter("crm_relay_rate_limit_refusals_total", {
  description: "Event API requests refused with 429 by the per-key rate limit.",
  incremental: true
})

/** How many requests a subject may make per window. */
export interface RateLimitPolicy {
  readonly limit: number
  readonly window: Duration.Duration
}

/** The Event API's limit: 60 requests per key per minute. */
export const eventApiPolicy: RateLimitPolicy = { limit: 60, window: Duration.minutes(1) }

/** The policy `RateLimiter` applies; the Event API's by default. */
export class RateLimitPolicyRef extends Context.Reference<RateLimitPolicyRef>()(
  "@crm-relay/events/RateLimitPolicy",
  { defaultValue: (): RateLimitPolicy => eventApiPolicy }
) {}

/** The outcome of counting one request. */
export interface RateLimitDecision {
  /** Whether this request is within the limit. */
  readonly allowed: boolean
  /** Requests counted in the current window, this one included. */
  readonly count: number
  /** Whole seconds until the window ends (at least 1): the `Retry-After`. */
  readonly retryAfterSeconds: number
}

/** Counts requests per subject. */
export class RateLimiter extends Effect.Service<RateLimiter>()("@crm-relay/events/RateLimiter", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const policy = yield* RateLimitPolicyRef
    const windowMillis = Duration.toMillis(policy.window)

    return {
      /** Counts one request of `subject` and says whether it is allowed. */
      hit: Effect.fn("RateLimiter.hit")(function*(subject: string) {
        const now = yield* Clock.currentTimeMillis
        const windowStart = new Date(Math.floor(now / windowMillis) * windowMillis)
        const rows = yield* sql<{ count: number; window_start: Date }>`
          INSERT INTO rate_limits AS r (subject, window_start, count) VALUES (${subject}, ${windowStart}, 1)
          ON CONFLICT (subject) DO UPDATE SET
            count = CASE WHEN EXCLUDED.window_start > r.window_start THEN 1 ELSE r.count + 1 END,
            window_start = GREATEST(r.window_start, EXCLUDED.window_start)
          RETURNING count, window_start`.pipe(Effect.orDie)
        const row = rows[0]!
        const endsAt = row.window_start.getTime() + windowMillis
        return {
          allowed: row.count <= policy.limit,
          count: row.count,
          retryAfterSeconds: Math.max(1, Math.ceil((endsAt - now) / 1000))
        } satisfies RateLimitDecision
      })
    }
  })
}) {}

/** A `RateLimiter` with another policy (for example in tests). */
export const layerWithPolicy = (policy: RateLimitPolicy): Layer.Layer<RateLimiter, never, SqlClient.SqlClient> =>
  RateLimiter.Default.pipe(Layer.provide(Layer.succeed(RateLimitPolicyRef, policy)))
