/** What runners report: a counter and a histogram of job attempts, by queue table and result. */
import { Metric, MetricBoundaries, MetricKey, MetricLabel } from "effect"
import type { JobResult } from "./Table.js"

const jobsKey = MetricKey.counter("crm_relay_jobs_total", {
  description: "Job runs (one per attempt) by queue table and result: completed, retried, dead_lettered or ended.",
  incremental: true
})
const secondsKey = MetricKey.histogram(
  "crm_relay_job_duration_seconds",
  MetricBoundaries.fromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "Duration of one job attempt in seconds (handler and result stored), by queue table and result."
)
/** Jobs run, by queue (table) and result: completed, retried, dead_lettered, ended (metric). */
export const jobsRun = Metric.fromMetricKey(jobsKey)
/** Time a job's attempt took, handler and result stored, by queue (metric). */
export const jobSeconds = Metric.fromMetricKey(secondsKey)

/** Each result of an attempt and its `result` label: every value the label has. */
export const JOB_RESULTS = {
  Complete: "completed",
  Retry: "retried",
  DeadLetter: "dead_lettered",
  End: "ended"
} as const satisfies Record<JobResult["_tag"], string>

/** The counter and the histogram of one queue and result. */
export interface JobSeries {
  readonly count: Metric.Metric.Counter<number>
  readonly seconds: Metric.Metric.Histogram<number>
}

// One set per queue table, made once, each series a metric of its full key: updated with the same
// (empty) extra labels every time, it finds its hook without hashing a key per job.
const byTable = new Map<string, { readonly [R in JobResult["_tag"]]: JobSeries }>()

/** The series of the queue `table` (its `queue` label), one per result. */
export const jobSeriesOf = (table: string): { readonly [R in JobResult["_tag"]]: JobSeries } => {
  let found = byTable.get(table)
  if (found === undefined) {
    const make = (result: JobResult["_tag"]): JobSeries => {
      const labels = [MetricLabel.make("queue", table), MetricLabel.make("result", JOB_RESULTS[result])]
      return {
        count: Metric.fromMetricKey(MetricKey.taggedWithLabels(jobsKey, labels)),
        seconds: Metric.fromMetricKey(MetricKey.taggedWithLabels(secondsKey, labels))
      }
    }
    found = { Complete: make("Complete"), Retry: make("Retry"), DeadLetter: make("DeadLetter"), End: make("End") }
    byTable.set(table, found)
  }
  return found
}
