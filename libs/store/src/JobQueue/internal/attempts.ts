import { type Clock, MetricLabel, Option, type Tracer } from "effect"
import * as TraceContext from "../../TraceContext.js"
import { jobSeconds, jobsRun } from "../Metrics.js"
import type { Job, JobResult, JobTable } from "../Table.js"

const resultLabel = { Complete: "completed", Retry: "retried", DeadLetter: "dead_lettered", End: "ended" } as const

/** Counts a finished attempt of `table`'s jobs and records how long it took since `started` (nanoseconds). */
export const observer = (table: string, clock: Clock.Clock) => {
  // The labels of each result, made once: a metric keeps one hook per label array it has seen, so
  // updating with the same array costs no key hashing per job.
  const labelsOf = (result: JobResult["_tag"]) => [
    MetricLabel.make("queue", table),
    MetricLabel.make("result", resultLabel[result])
  ]
  const labels = { End: labelsOf("End"), Complete: labelsOf("Complete"), Retry: labelsOf("Retry"), DeadLetter: labelsOf("DeadLetter") }
  return (result: JobResult, started: bigint) => {
    const tags = labels[result._tag]
    jobsRun.unsafeUpdate(1, tags)
    jobSeconds.unsafeUpdate(Number(clock.unsafeCurrentTimeNanos() - started) / 1e9, tags)
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
