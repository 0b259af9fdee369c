/** What runners report: a counter and a histogram of job attempts, by queue table and result. */
import { Metric, MetricBoundaries } from "effect"

/** Jobs run, by queue (table) and result: completed, retried, dead_lettered, ended (metric). */
export const jobsRun = Metric.counter("crm_relay_jobs_total", {
  description: "Job runs (one per attempt) by queue table (crm_push_jobs, deliveries) and result: completed, retried, dead_lettered or ended.",
  incremental: true
})
/** Time a job's attempt took, handler and result stored, by queue (metric). */
export const jobSeconds = Metric.histogram(
  "crm_relay_job_duration_seconds",
  MetricBoundaries.fromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "Duration of one job attempt in seconds (handler and result stored), by queue table and result."
)
