import type { Job } from "../Table.js"

/** The job a claimed or handed-over row is (the claim's columns); on a fair table its `job_fair_key` is the job's key. */
export const jobOf = <A>(row: Record<string, unknown>, data: A, fair: boolean): Job<A> => ({
  id: String(row["id"]),
  attempt: Number(row["attempts"]),
  data,
  traceparent: typeof row["traceparent"] === "string" ? row["traceparent"] : undefined,
  key: fair && typeof row["job_fair_key"] === "string" ? row["job_fair_key"] : undefined
})
