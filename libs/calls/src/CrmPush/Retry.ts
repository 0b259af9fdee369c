/**
 * The persisted form of the post-call retry schedule: instead of sleeping in
 * memory, a push job that failed transiently is rescheduled in the database
 * after the delay the schedule gives for that attempt (never shorter than the
 * bridge's Retry-After), and dead-lettered when the schedule ends.
 *
 * The delay is read from the named Schedule itself (`Schedules.postCallRetry`
 * by default): it is stepped once per earlier failure, and the last step is
 * taken at the real time elapsed since the job's first attempt, so the
 * schedule's attempt cap and its "no retry after 30 minutes" both hold
 * across processes and restarts.
 */
import type { BridgeError } from "@crm-relay/bridge"
import { Schedules } from "@crm-relay/bridge"
import { Context, Duration, Effect, Option, type Schedule } from "effect"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleIntervals from "effect/ScheduleIntervals"

/** The schedule the push worker follows; tests substitute a short one through a Layer. */
export class CrmPushRetry extends Context.Reference<CrmPushRetry>()("@crm-relay/calls/CrmPushRetry", {
  defaultValue: (): { readonly schedule: Schedule.Schedule<unknown, BridgeError> } => ({
    schedule: Schedules.postCallRetry
  })
}) {}

/**
 * The wait before the next attempt after the `failures`-th failed attempt
 * (1 for the first) failed with `error`, `elapsed` after the first attempt
 * started; none when the schedule says stop.
 */
export const nextDelay = <In>(
  schedule: Schedule.Schedule<unknown, In>,
  failures: number,
  error: In,
  elapsed: Duration.Duration
): Effect.Effect<Option.Option<Duration.Duration>> =>
  Effect.gen(function*() {
    let state: unknown = schedule.initial
    const steps = Math.max(1, failures)
    const elapsedMillis = Math.max(0, Duration.toMillis(elapsed))
    for (let step = 1; step <= steps; step++) {
      // Earlier steps at time 0, the last one at the real elapsed time.
      const now = step === steps ? elapsedMillis : 0
      const [next, , decision] = yield* schedule.step(now, error, state)
      if (ScheduleDecision.isDone(decision)) return Option.none()
      state = next
      if (step === steps) {
        return Option.some(Duration.millis(Math.max(0, ScheduleIntervals.start(decision.intervals) - now)))
      }
    }
    return Option.none()
  })
