/**
 * Storing the delivery worker's results as a function. The runner stores the
 * results that are waiting together in one statement (JobQueue's
 * `finishMany`): the state changes, guarded by the lease owner, and the
 * attempt rows. Sent as SQL text, that statement was parsed and planned
 * again on every call (about 0.4 ms of PostgreSQL's CPU each time, and at a
 * low rate every delivery is a call of its own); PL/pgSQL plans a function's
 * statements once per session and keeps the plans.
 *
 * `deliveries_finish(owner, jobs, log)` does what `finishMany`'s statement
 * does for the `deliveries` table: `jobs` is a JSON array of the rows' new
 * state (`id`, `status`, `last_error`, `next_attempt_at` for a retry, and
 * `delivered_at` or `end_reason` when given: a column absent from an element
 * keeps its value), applied only to rows still pending under `owner`'s lease;
 * `log` a JSON array of `delivery_attempts` rows, inserted whatever the lease
 * (an attempt happened). It returns the ids whose lease `owner` still held.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE FUNCTION deliveries_finish(p_owner text, p_jobs jsonb, p_log jsonb)
  RETURNS TABLE (id uuid)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH job AS (
    SELECT e.value AS job_raw, r.* FROM jsonb_array_elements(p_jobs) AS e(value),
      jsonb_populate_record(NULL::deliveries, e.value) AS r
  ), changed AS (
    UPDATE deliveries SET status = job.status, last_error = job.last_error,
      next_attempt_at = COALESCE(job.next_attempt_at, deliveries.next_attempt_at),
      lease_owner = NULL, lease_expires_at = NULL,
      delivered_at = CASE WHEN job.job_raw -> 'delivered_at' IS NULL THEN deliveries.delivered_at ELSE job.delivered_at END,
      end_reason = CASE WHEN job.job_raw -> 'end_reason' IS NULL THEN deliveries.end_reason ELSE job.end_reason END
    FROM job WHERE deliveries.id = job.id AND deliveries.lease_owner = p_owner AND deliveries.status = 'pending'
    RETURNING deliveries.id
  ), logged AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, started_at, status_code, duration_ms, error_class, error, result)
    SELECT a.delivery_id, a.attempt, a.started_at, a.status_code, a.duration_ms, a.error_class, a.error, a.result
    FROM jsonb_populate_recordset(NULL::delivery_attempts, p_log) AS a
  )
  SELECT changed.id FROM changed;
END
$fn$`
])
