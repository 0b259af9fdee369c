/**
 * The named retry policies of bridge calls, defined once.
 *
 * - `postCallRetry`: the worker's schedule. Only Transient failures are
 *   retried; Conflict, Auth and Permanent stop at once (contract "Errors").
 * - `inCallBudget`: in-call operations get one exchange inside a time budget
 *   and never wait through the post-call schedule (Errors rule 3).
 */
import { Duration, Effect, Option, Schedule } from "effect"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"
import { boundRetryAfter, transient } from "./BridgeError.js"

/** First post-call retry delay, before jitter. */
export const POST_CALL_BASE_DELAY: Duration.Duration = Duration.seconds(2)
/** Each post-call delay doubles. */
export const POST_CALL_FACTOR = 2
/** Jitter: each delay is scaled by a random factor in [0.8, 1.2]. */
export const POST_CALL_JITTER = { min: 0.8, max: 1.2 } as const
/** No single post-call delay exceeds five minutes (the Retry-After bound too). */
export const POST_CALL_MAX_DELAY: Duration.Duration = Duration.minutes(5)
/** At most this many retries (so 11 attempts in all). */
export const POST_CALL_MAX_RETRIES = 10
/** No retry starts once this much time has passed since the first attempt. */
export const POST_CALL_MAX_ELAPSED: Duration.Duration = Duration.minutes(30)

/** Whether a failure may be retried: only Transient ones (429, 5xx, network, timeout). */
export const isRetryable = (error: BridgeError): boolean => error._tag === "Transient"

/** The wait a failure asks for: its Retry-After, bounded to five minutes, or none. */
export const requestedWait = (error: BridgeError): Duration.Duration =>
  error._tag === "Transient" ? Option.match(error.retryAfter, { onNone: () => Duration.zero, onSome: boundRetryAfter }) : Duration.zero

// 2 s, 4 s, 8 s, … jittered, each capped at five minutes and rounded to whole
// milliseconds (clocks, including the TestClock, count whole milliseconds).
const backoff = Schedule.exponential(POST_CALL_BASE_DELAY, POST_CALL_FACTOR).pipe(
  Schedule.jitteredWith(POST_CALL_JITTER),
  Schedule.modifyDelay((_, delay) => Duration.millis(Math.round(Duration.toMillis(Duration.min(delay, POST_CALL_MAX_DELAY)))))
)

// Waits what the bridge asked for; `intersect` keeps the longer of the two delays.
const retryAfter = Schedule.identity<BridgeError>().pipe(Schedule.addDelay(requestedWait))

/**
 * The post-call retry schedule: exponential backoff from 2 s (×2, jitter
 * 0.8–1.2, each delay at most 5 minutes), never shorter than the bridge's
 * Retry-After (honoured up to 5 minutes), at most 10 retries and none
 * started after 30 minutes; stops at once on Conflict, Auth and Permanent.
 */
export const postCallRetry: Schedule.Schedule<unknown, BridgeError> = backoff.pipe(
  Schedule.intersect(retryAfter),
  Schedule.intersect(Schedule.recurs(POST_CALL_MAX_RETRIES)),
  Schedule.whileInput(isRetryable),
  Schedule.upTo(POST_CALL_MAX_ELAPSED)
)

/**
 * The in-call time budget: one exchange (including an OAuth grant and the one
 * 401 replay) must finish within it; there is no retry.
 */
export const inCallBudget: Duration.Duration = Duration.seconds(8)

/** Bounds an in-call operation by {@link inCallBudget}; running out is a Transient timeout. */
export const withinInCallBudget =
  (operation: Operations.OperationName) => <A, R>(self: Effect.Effect<A, BridgeError, R>): Effect.Effect<A, BridgeError, R> =>
    Effect.timeoutFail(self, {
      duration: inCallBudget,
      onTimeout: () =>
        transient({
          operation,
          status: null,
          message: `The in-call time budget of ${Duration.format(inCallBudget)} ran out before the bridge answered.`
        })
    })
