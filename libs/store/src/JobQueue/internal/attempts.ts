import { type Clock, type MetricLabel, Option, type Tracer } from "effect"
import * as TraceContext from "../../TraceContext.js"
import { jobSeriesOf } from "../Metrics.js"
import type { Job, JobResult, JobTable } from "../Table.js"

/** Counts a finished attempt of `table`'s jobs and records how long it took since `started` (nanoseconds). */
export const observer = (table: string, clock: Clock.Clock) => {
  const series = jobSeriesOf(table)
  // The same array every time: a metric keeps one hook per extra-label array it has seen.
  const none: ReadonlyArray<MetricLabel.MetricLabel> = []
  return (result: JobResult, started: bigint) => {
    const observed = series[result._tag]
    observed.count.unsafeUpdate(1, none)
    observed.seconds.unsafeUpdate(Number(clock.unsafeCurrentTimeNanos() - started) / 1e9, none)
  }
}

/** One span per attempt, in the trace that queued the job when the table stores it. */
export const spanOptionsOf = <A>(jobs: JobTable<A>) => (job: Job<A>): Tracer.SpanOptions => {
  const parent = jobs.traced ? TraceContext.parse(job.traceparent) : Option.none()
  return {
    kind: "consumer",
    captureStackTrace: false,
    attributes: { "job.queue": jobs.table, "job.id": job.id, "job.attempt": job.attempt },
    ...(Option.isSome(parent) ? { parent: parent.value } : { root: true })
  }
}
