/**
 * Fixed-window rate limiting counted in PostgreSQL, so the limit holds
 * across replicas: one row per subject, bumped by a single atomic upsert per
 * request (the row lock of `ON CONFLICT DO UPDATE` makes concurrent counts
 * exact), in the database function `rate_limit_hit`. Time comes from Effect's `Clock`; a replica whose clock lags counts
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

/** The start of the window `now` falls in. */
export const windowStart = (policy: RateLimitPolicy, now: number): Date => {
  const millis = Duration.toMillis(policy.window)
  return new Date(Math.floor(now / millis) * millis)
}

/**
 * The counting rule, shared by every statement that counts a request: the
 * database function `rate_limit_hit` (one atomic upsert; its plan is kept per
 * session), answering the subject's count and window after this request.
 */
export const hitStatement = (sql: SqlClient.SqlClient, subject: string, windowStart: Date) =>
  sql<{ readonly count: number; readonly window_start: Date }>`SELECT h.count, h.window_start FROM rate_limit_hit(${subject}, ${windowStart}) AS h`

/** The decision for a request counted `count`-th in the window starting at `start`, at `now`. */
export const decide = (policy: RateLimitPolicy, now: number, count: number, start: Date): RateLimitDecision => ({
  allowed: count <= policy.limit,
  count,
  retryAfterSeconds: Math.max(1, Math.ceil((start.getTime() + Duration.toMillis(policy.window) - now) / 1000))
})

/** Counts requests per subject. */
export class RateLimiter extends Effect.Service<RateLimiter>()("@crm-relay/events/RateLimiter", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const policy = yield* RateLimitPolicyRef

    return {
      /** Counts one request of `subject` and says whether it is allowed. */
      hit: Effect.fn("RateLimiter.hit")(function*(subject: string) {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* Effect.orDie(hitStatement(sql, subject, windowStart(policy, now)))
        const row = rows[0]!
        return decide(policy, now, row.count, row.window_start)
      })
    }
  })
}) {}

/** A `RateLimiter` with another policy (for example in tests). */
export const layerWithPolicy = (policy: RateLimitPolicy): Layer.Layer<RateLimiter, never, SqlClient.SqlClient> =>
  RateLimiter.Default.pipe(Layer.provide(Layer.succeed(RateLimitPolicyRef, policy)))
