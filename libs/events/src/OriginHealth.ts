/**
 * The health of a receiver origin (a webhook receiver's scheme, host and
 * port, or a broker host: the fair queue's key), kept in `origin_health`
 * (store migration 0025) so that every replica reads it and a restart keeps it.
 *
 * - **Failing.** An attempt that finds the origin unavailable (a 5xx or 429,
 *   a timeout, a network failure; for a broker, any transient failure) adds
 *   to the origin's streak, unless the last failure was of the same delivery:
 *   a message that only the receiver rejects never grows it. At
 *   `threshold` consecutive failures of distinct deliveries, with no success
 *   between, the origin is held from the streak's first failure on.
 * - **Held.** The claim (`deliveries_claim_fairly_4`) takes no work of a held
 *   origin but its probe: the oldest due delivery, once per probe interval,
 *   by one claimer across replicas. The interval grows from `first` to `max`;
 *   a `Retry-After` (of a 429 or 503) sets it, up to `maxRetryAfter`. Held
 *   deliveries wait without spending attempts: a failure once the origin is
 *   held is counted in `held_attempts`, which the retry schedule steps over.
 * - **Back.** Any answer of the origin that is not unavailability (a 2xx, a
 *   4xx, a 410) deletes the row; when the origin was held, what waited for
 *   it is due at once and the workers are woken: it drains at the origin's
 *   fair share.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, Option, Schema } from "effect"
import type { Outcome } from "./Destination.js"

/** When an origin is held and how often it is probed. */
export interface ProbePolicy {
  /** Consecutive failures of distinct deliveries, with no success between, that hold the origin. */
  readonly threshold: number
  /** The first probe interval. */
  readonly first: Duration.Duration
  /** Each failed probe multiplies the interval by this, up to `max`. */
  readonly factor: number
  /**
   * The longest interval: what everything held waits at most after the origin's return, before it
   * drains. Recovery in seconds needs it short; a longer one is quieter toward a long outage.
   */
  readonly max: Duration.Duration
  /** The longest `Retry-After` a probe honours (the contract's bound: 5 minutes). */
  readonly maxRetryAfter: Duration.Duration
}

/**
 * Held at 3 distinct failures; probes at 3 s, growing by half up to 5 s (so everything held is sent within
 * seconds of the return, and a receiver that is down gets one request per 5 s); Retry-After up to 5 minutes.
 */
export const DEFAULT_PROBE_POLICY: ProbePolicy = {
  threshold: 3,
  first: Duration.seconds(3),
  factor: 1.5,
  max: Duration.seconds(5),
  maxRetryAfter: Duration.minutes(5)
}

/** A claimed delivery's origin, as the claim reads it: its probe, or a streak of failures under way. */
export const ClaimedOriginState = Schema.Literal("probe", "suspect")
export type ClaimedOriginState = typeof ClaimedOriginState.Type

/**
 * The select-list expression of a claimed delivery's origin state without the claim function, which alone
 * claims probes (`deliveries_claim_fairly_4`): `suspect` while its origin has a health row.
 */
export const claimedStateSql =
  `(SELECT 'suspect'::text FROM origin_health AS h WHERE h.origin = deliveries.target_origin)`

/** The FROM-clause join of a listed delivery `d` to its origin's health, while it is pending and held (`h`). */
export const heldJoin = `LEFT JOIN origin_health AS h
        ON d.status = 'pending' AND h.origin = d.target_origin AND h.failing_since IS NOT NULL`

/**
 * Until when the work of the key `k.key` waits while its origin is held: its next probe, or the end of the
 * probe running now (JobQueue `Fairness.heldUntil`: the runners' wake-time).
 */
export const heldUntilSql = `(SELECT GREATEST(h.next_probe_at, h.probe_until) FROM origin_health AS h
  WHERE h.origin = k.key AND h.failing_since IS NOT NULL)`

/**
 * Whether an outcome says the origin as a whole is unavailable: a 5xx or a 429, or no answer at all
 * (a timeout, a network failure, a broker's transient failure). A 3xx or 4xx is an answer: the origin is up.
 */
export const isUnavailable = (outcome: Outcome): boolean =>
  outcome._tag === "Transient" &&
  (outcome.statusCode === null || outcome.statusCode === 429 || (outcome.statusCode >= 500 && outcome.statusCode <= 599))

/** What one failure did to its origin. */
export interface Noted {
  /** The origin is held (now, or already was). */
  readonly held: boolean
  /** This failure held it. */
  readonly tripped: boolean
  /** Since when it has been failing, once held. */
  readonly failingSince: Date | null
}

/** An origin held as failing, as operators see it. */
export const HeldOrigin = Schema.Struct({
  origin: Schema.String,
  failing_since: Schema.DateFromSelf,
  next_probe_at: Schema.DateFromSelf,
  /** A probe is running now (a replica holds it until then). */
  probe_until: Schema.NullOr(Schema.DateFromSelf),
  probes: Schema.Int,
  last_error: Schema.NullOr(Schema.String)
})
export type HeldOrigin = typeof HeldOrigin.Type

const decodeHeld = Schema.decodeUnknown(Schema.Array(HeldOrigin))

/**
 * A failure that found `origin` unavailable, of delivery `deliveryId` (`probe`: it was the held
 * origin's probe), in the attempt started at `startedAt`. `retryAfter` is the least wait the remote
 * asked for (zero when none). One statement.
 */
export const noteFailure = (
  origin: string,
  deliveryId: string,
  startedAt: Date,
  probe: boolean,
  retryAfter: Duration.Duration,
  error: string,
  policy: ProbePolicy = DEFAULT_PROBE_POLICY
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const at = new Date(now)
    const firstMs = Duration.toMillis(policy.first)
    const maxMs = Duration.toMillis(policy.max)
    const askedMs = Math.min(Duration.toMillis(retryAfter), Duration.toMillis(policy.maxRetryAfter))
    // SET expressions read the row as it was: the new streak is spelled out where it is needed. The streak starts
    // with the earliest failing attempt's start (attempts run concurrently), so noteUp finds every attempt of it.
    const streak = sql`CASE WHEN h.last_failed_delivery = ${deliveryId}::uuid THEN h.streak ELSE h.streak + 1 END`
    const trips = sql`(h.failing_since IS NULL AND ${streak} >= ${policy.threshold}::integer)`
    // A failed probe grows the interval; a trip starts it; the wait asked for moves the next probe no sooner.
    const interval = sql`CASE
      WHEN ${trips} THEN ${firstMs}::integer
      WHEN ${probe}::boolean THEN LEAST(GREATEST(round(COALESCE(h.probe_interval_ms, ${firstMs}) * ${policy.factor}::float8)::integer,
        ${firstMs}::integer), ${maxMs}::integer)
      ELSE h.probe_interval_ms END`
    const rows = yield* sql<{ failing_since: Date | null; was: Date | null }>`
      WITH before AS (SELECT failing_since FROM origin_health WHERE origin = ${origin}), noted AS (
      INSERT INTO origin_health AS h (origin, streak, streak_started_at, last_failed_delivery, last_error,
        failing_since, next_probe_at, probe_interval_ms)
      VALUES (${origin}, 1, ${startedAt}, ${deliveryId}, ${error.slice(0, 500)},
        CASE WHEN ${policy.threshold}::integer <= 1 THEN ${startedAt}::timestamptz END,
        CASE WHEN ${policy.threshold}::integer <= 1 THEN ${new Date(now + Math.max(firstMs, askedMs))}::timestamptz END,
        CASE WHEN ${policy.threshold}::integer <= 1 THEN ${firstMs}::integer END)
      ON CONFLICT (origin) DO UPDATE SET
        streak = ${streak},
        last_failed_delivery = EXCLUDED.last_failed_delivery,
        last_error = EXCLUDED.last_error,
        streak_started_at = LEAST(h.streak_started_at, ${startedAt}::timestamptz),
        failing_since = CASE WHEN ${trips} THEN LEAST(h.streak_started_at, ${startedAt}::timestamptz) ELSE h.failing_since END,
        probe_interval_ms = ${interval},
        next_probe_at = CASE
          WHEN ${trips} OR (h.failing_since IS NOT NULL AND ${probe}::boolean)
            THEN ${at}::timestamptz + make_interval(secs => GREATEST(${interval}, ${askedMs}::integer) / 1000.0)
          WHEN h.failing_since IS NOT NULL
            THEN GREATEST(h.next_probe_at, ${new Date(now + askedMs)}::timestamptz)
          END,
        probe_owner = CASE WHEN ${probe}::boolean THEN NULL ELSE h.probe_owner END,
        probe_until = CASE WHEN ${probe}::boolean THEN NULL ELSE h.probe_until END
      RETURNING h.failing_since)
      SELECT noted.failing_since, (SELECT before.failing_since FROM before) AS was FROM noted`
    const row = rows[0]
    const failingSince = row?.failing_since ?? null
    return { held: failingSince !== null, tripped: failingSince !== null && (row?.was ?? null) === null, failingSince } satisfies Noted
  })

/**
 * `origin` answered: its streak ends. Answers since when it had been failing when it was held (then what
 * waited for it is due from now, and the caller wakes the workers), none otherwise.
 */
export const noteUp = (origin: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ failing_since: Date | null }>`DELETE FROM origin_health WHERE origin = ${origin}
      RETURNING failing_since`
    const since = rows[0]?.failing_since ?? null
    if (since === null) return Option.none<Date>()
    const at = new Date(yield* Clock.currentTimeMillis)
    // Deliveries that failed on their own schedule once the outage had begun (before it held the origin) are due
    // now too; a delivery held meanwhile already is (a held failure keeps it due).
    yield* sql`UPDATE deliveries AS d SET next_attempt_at = ${at}
      WHERE d.target_origin = ${origin} AND d.status = 'pending' AND d.next_attempt_at > ${at}
        AND EXISTS (SELECT 1 FROM delivery_attempts AS a WHERE a.delivery_id = d.id AND a.started_at >= ${since})`
    return Option.some(since)
  })

/** A probe of `origin` that ended without reaching it (nothing was sent): the next claim may probe at once. */
export const releaseProbe = (origin: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`UPDATE origin_health SET probe_owner = NULL, probe_until = NULL WHERE origin = ${origin} AND failing_since IS NOT NULL`)

/** The origins held now, the longest failing first. */
export const held = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`SELECT origin, failing_since, next_probe_at, probe_until, probes, last_error
    FROM origin_health WHERE failing_since IS NOT NULL ORDER BY failing_since, origin`
  return yield* decodeHeld(rows)
})

/** How many origins are held now (the `failing origins` gauge). */
export const heldCount = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ n: number | string }>`SELECT count(*) AS n FROM origin_health WHERE failing_since IS NOT NULL`
  return Number(rows[0]?.n ?? 0)
})
