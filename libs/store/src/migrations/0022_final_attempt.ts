/**
 * The attempt that finishes a delivery is stored on the delivery's row
 * (issue 35, leaner writes). Every attempt was a `delivery_attempts` row,
 * written with the outcome: about 270 bytes of WAL (heap, primary key and
 * `delivery_attempts_delivery_idx`) for the common delivery, one attempt
 * and delivered. Its facts now ride in the UPDATE that finishes the row.
 *
 * `final_attempt` .. `final_error` hold the last finished attempt of the
 * row's latest run (NULL: none); its result is the delivery's status
 * (`delivered`, `failed` or `ended`). Adding nullable columns without a
 * default rewrites nothing.
 *
 * `deliveries_finish_2(owner, jobs, log)` is 0013's `deliveries_finish`
 * that stores on the row, instead of inserting it, an attempt of `log`
 * whose result is the delivery's new status, when `owner` still holds the
 * lease. A `retry` attempt, and any attempt of a worker that lost its
 * lease, is inserted into `delivery_attempts` as before. A final attempt
 * already on the row (left by a replay of a replica of the previous
 * release, which does not move it) is kept as a `delivery_attempts` row
 * before being overwritten; its result is read from the attempt itself
 * (no error class: delivered), the row's status being `pending` again.
 *
 * Readers take the log's rows, then the row's final attempt (Deliveries);
 * a replay moves the final attempt into the log in its own statement
 * (JobQueue's `FinalAttempt`). `deliveries_finish` stays for replicas of
 * the previous release during a rolling upgrade.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries ADD COLUMN final_attempt integer, ADD COLUMN final_started_at timestamptz,
    ADD COLUMN final_status_code integer, ADD COLUMN final_duration_ms integer,
    ADD COLUMN final_error_class text, ADD COLUMN final_error text`,
  `CREATE FUNCTION deliveries_finish_2(p_owner text, p_jobs jsonb, p_log jsonb)
  RETURNS TABLE (id uuid)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH job AS (
    SELECT e.value AS job_raw, r.* FROM jsonb_array_elements(p_jobs) AS e(value),
      jsonb_populate_record(NULL::deliveries, e.value) AS r
  ), attempt AS (
    SELECT a.* FROM jsonb_populate_recordset(NULL::delivery_attempts, p_log) AS a
  ), changed AS (
    UPDATE deliveries SET status = job.status, last_error = job.last_error,
      next_attempt_at = COALESCE(job.next_attempt_at, deliveries.next_attempt_at),
      lease_owner = NULL, lease_expires_at = NULL,
      delivered_at = CASE WHEN job.job_raw -> 'delivered_at' IS NULL THEN deliveries.delivered_at ELSE job.delivered_at END,
      end_reason = CASE WHEN job.job_raw -> 'end_reason' IS NULL THEN deliveries.end_reason ELSE job.end_reason END,
      final_attempt = CASE WHEN f.attempt IS NULL THEN deliveries.final_attempt ELSE f.attempt END,
      final_started_at = CASE WHEN f.attempt IS NULL THEN deliveries.final_started_at ELSE f.started_at END,
      final_status_code = CASE WHEN f.attempt IS NULL THEN deliveries.final_status_code ELSE f.status_code END,
      final_duration_ms = CASE WHEN f.attempt IS NULL THEN deliveries.final_duration_ms ELSE f.duration_ms END,
      final_error_class = CASE WHEN f.attempt IS NULL THEN deliveries.final_error_class ELSE f.error_class END,
      final_error = CASE WHEN f.attempt IS NULL THEN deliveries.final_error ELSE f.error END
    FROM job LEFT JOIN LATERAL (
      SELECT attempt.attempt, attempt.started_at, attempt.status_code, attempt.duration_ms, attempt.error_class, attempt.error
      FROM attempt WHERE attempt.delivery_id = job.id AND attempt.result = job.status
      ORDER BY attempt.attempt DESC LIMIT 1
    ) AS f ON true
    WHERE deliveries.id = job.id AND deliveries.lease_owner = p_owner AND deliveries.status = 'pending'
    RETURNING deliveries.id, deliveries.status, f.attempt AS stored
  ), logged AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, started_at, status_code, duration_ms, error_class, error, result)
    SELECT d.id, d.final_attempt, d.final_started_at, d.final_status_code, d.final_duration_ms, d.final_error_class, d.final_error,
      CASE WHEN d.final_error_class IS NULL THEN 'delivered' ELSE 'failed' END
    FROM changed JOIN deliveries AS d ON d.id = changed.id
    WHERE changed.stored IS NOT NULL AND d.final_attempt IS NOT NULL
    UNION ALL
    SELECT a.delivery_id, a.attempt, a.started_at, a.status_code, a.duration_ms, a.error_class, a.error, a.result
    FROM attempt AS a
    WHERE NOT EXISTS (SELECT 1 FROM changed WHERE changed.id = a.delivery_id AND changed.stored = a.attempt AND changed.status = a.result)
  )
  SELECT changed.id FROM changed;
END
$fn$`
])
