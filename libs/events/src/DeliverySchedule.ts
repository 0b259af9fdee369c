/**
 * When a failed webhook delivery is tried again: the named Schedule
 * `deliveryRetry`, defined once.
 *
 * - Retries after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (8 attempts in
 *   all, spread over about 32 hours), each delay scaled by a random factor in
 *   [0.8, 1.2].
 * - Never sooner than the failure asks: at least 60 s after a timeout or a
 *   429, and at least the receiver's `Retry-After` (delta-seconds or
 *   HTTP-date), which is honoured up to 10 hours — the schedule's longest
 *   gap — so one answer cannot park a delivery for days.
 * - A failure that retrying cannot fix (egress refused the target: private
 *   address, not https) stops at once.
 *
 * The worker keeps no schedule state between attempts: `delayAfter` replays
 * the schedule up to the failed attempt (the attempt count is in the row).
 */
import { Duration, Effect, Option, Schedule, ScheduleDecision, ScheduleIntervals } from "effect"

/** A failed attempt, as the schedule sees it. */
export interface DeliveryFailure {
  /** False when retrying cannot help (the target was refused). */
  readonly retryable: boolean
  /** The least time to wait before the next attempt (zero when the failure asks for nothing). */
  readonly wait: Duration.Duration
}

/** The delays between attempts, before jitter. */
export const DELIVERY_DELAYS: ReadonlyArray<Duration.Duration> = [
  Duration.seconds(5),
  Duration.minutes(5),
  Duration.minutes(30),
  Duration.hours(2),
  Duration.hours(5),
  Duration.hours(10),
  Duration.hours(10)
]

/** Attempts in all: the first one and one per delay. */
export const MAX_ATTEMPTS = DELIVERY_DELAYS.length + 1

/** Each delay is scaled by a random factor in this range (±20 %). */
export const DELIVERY_JITTER = { min: 0.8, max: 1.2 } as const

/** The least wait after a timeout or a 429. */
export const MIN_WAIT_AFTER_TIMEOUT_OR_429: Duration.Duration = Duration.seconds(60)

/** The longest Retry-After honoured (the schedule's longest gap). */
export const MAX_RETRY_AFTER: Duration.Duration = Duration.hours(10)

const [first, ...rest] = DELIVERY_DELAYS

// The fixed delays, jittered and rounded to whole milliseconds (clocks count whole milliseconds).
const delays = Schedule.fromDelays(first!, ...rest).pipe(
  Schedule.jitteredWith(DELIVERY_JITTER),
  Schedule.modifyDelay((_, delay) => Duration.millis(Math.round(Duration.toMillis(delay))))
)

// What the failure asks for; `intersect` keeps the longer of the two delays.
const requested = Schedule.identity<DeliveryFailure>().pipe(Schedule.addDelay((failure) => failure.wait))

/**
 * The webhook delivery retry schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
 * 10 h (±20 % jitter), never shorter than the failure's `wait`, and no
 * retry at all for a failure that is not retryable.
 */
export const deliveryRetry: Schedule.Schedule<readonly [Duration.Duration, DeliveryFailure], DeliveryFailure> = delays.pipe(
  Schedule.intersect(requested),
  Schedule.whileInput((failure: DeliveryFailure) => failure.retryable)
)

/**
 * The wait before the next attempt after attempt number `attempt` (1 for the
 * first) failed with `failure`, or none when the schedule has ended.
 */
export const delayAfter = (attempt: number, failure: DeliveryFailure): Effect.Effect<Option.Option<Duration.Duration>> =>
  Effect.gen(function*() {
    let state = deliveryRetry.initial
    let now = 0
    let delay = Duration.zero
    for (let step = 0; step < Math.max(1, attempt); step++) {
      const [next, , decision] = yield* deliveryRetry.step(now, failure, state)
      if (ScheduleDecision.isDone(decision)) return Option.none()
      const at = ScheduleIntervals.start(decision.intervals)
      delay = Duration.millis(at - now)
      now = at
      state = next
    }
    return Option.some(delay)
  })

const DELTA_SECONDS = /^\d{1,10}$/

/**
 * The wait a `Retry-After` value asks for at `nowMillis` (RFC 9110 §10.2.3:
 * delta-seconds or an HTTP-date), bounded to [0, MAX_RETRY_AFTER]; none when
 * absent or unreadable.
 */
export const parseRetryAfter = (value: string | undefined, nowMillis: number): Option.Option<Duration.Duration> => {
  if (value === undefined) return Option.none()
  const text = value.trim()
  const bound = (millis: number) => Duration.min(Duration.millis(Math.max(0, millis)), MAX_RETRY_AFTER)
  if (DELTA_SECONDS.test(text)) return Option.some(bound(Number(text) * 1000))
  const at = Date.parse(text)
  return Number.isNaN(at) || !/[A-Za-z]/.test(text) ? Option.none() : Option.some(bound(at - nowMillis))
}
