/**
 * Claiming and finishing deliveries cost what they touch, not what the
 * table holds (issue 35: 10 000 deliveries out at 2 000/s).
 *
 * `deliveries_claim_fairly_3` (0020) runs with a generic plan (its limit is a
 * parameter), which expects a claim to choose about a tenth of the table. Its
 * last step, `UPDATE deliveries ... FROM chosen WHERE deliveries.id =
 * chosen.id`, was therefore planned as a hash join over a sequential scan of
 * `deliveries`: every claim read the whole table, however few rows it took.
 * With 20 000 rows that was 5 ms of a 6 ms claim of 8; the worker claims one
 * batch at a time, so it capped a backlog's drain at about 1 600
 * deliveries/s on two cores, lower the more deliveries the table kept (until
 * the table grew big enough for the planner to give up the scan).
 *
 * The same generic plan, made at a session's first claim, is kept for the
 * session's life: made while the table held few pending rows, it could
 * find each chosen row to lock through `deliveries_fair_due_idx` (its due
 * time, then a filter on the id) instead of the primary key, a read of the
 * whole backlog per row once the backlog grew (40 ms claims). The lock's
 * re-check that the row is unfinished is now written so that no partial
 * index of pending rows matches it (`status <> ALL (finished statuses)`, the
 * same rows under the table's check): the primary key is the only index
 * that finds the row.
 *
 * `deliveries_finish_2` (0022) had the same plan for the rows it keeps in
 * the attempt log (a final attempt already on a row it overwrites, rare):
 * a join of the changed rows with `deliveries`, a sequential scan of the
 * table in every finishing statement.
 *
 * Both are replaced in place with the same arguments and results: the ids
 * are gathered into an array first, and each row is found by its primary
 * key. Replicas of the previous release call these functions too, and get
 * the same answers sooner. (`deliveries_claim_fairly_2`, kept for the
 * release before 0020 during an upgrade, is left as it is.)
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE OR REPLACE FUNCTION deliveries_claim_fairly_3(
  p_owner text, p_at timestamptz, p_until timestamptz, p_limit integer, p_max_per_key integer, p_room jsonb
) RETURNS TABLE (
  id uuid, attempts integer, account_id uuid, target_url text, body text, outcome jsonb, subscription_removed boolean,
  subscription_id uuid, subscription_state text, destination_id uuid, traceparent text, job_fair_key text
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH RECURSIVE room AS (
    SELECT r.key, r.value::int AS room FROM jsonb_each_text(p_room) AS r
  ), pending_keys AS (
    (SELECT d.target_origin AS key FROM deliveries AS d WHERE d.status = 'pending' ORDER BY d.target_origin LIMIT 1)
    UNION ALL
    SELECT (SELECT d.target_origin FROM deliveries AS d WHERE d.status = 'pending' AND d.target_origin > pending_keys.key
      ORDER BY d.target_origin LIMIT 1)
    FROM pending_keys WHERE pending_keys.key IS NOT NULL
  ), candidates AS (
    SELECT c.id, c.job_group, c.next_attempt_at
    FROM pending_keys AS k LEFT JOIN room ON room.key = k.key
    CROSS JOIN LATERAL (
      SELECT d.id, d.account_id AS job_group, d.next_attempt_at FROM deliveries AS d
      WHERE d.target_origin = k.key AND d.status = 'pending' AND d.next_attempt_at <= p_at
        AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= p_at)
      ORDER BY d.next_attempt_at
      LIMIT GREATEST(LEAST(COALESCE(room.room, p_max_per_key), p_limit), 0)
    ) AS c
    WHERE k.key IS NOT NULL
  ), turns AS (
    SELECT candidates.id, candidates.next_attempt_at,
      row_number() OVER (PARTITION BY candidates.job_group ORDER BY candidates.next_attempt_at, candidates.id) AS turn
    FROM candidates
  ), chosen AS (
    SELECT locked.id FROM (SELECT turns.id FROM turns ORDER BY turns.turn, turns.next_attempt_at LIMIT p_limit) AS pick
    CROSS JOIN LATERAL (
      SELECT d.id FROM deliveries AS d
      WHERE d.id = pick.id AND d.status <> ALL (ARRAY['delivered', 'failed', 'ended']) AND d.next_attempt_at <= p_at
        AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= p_at)
      FOR UPDATE SKIP LOCKED
    ) AS locked
  )
  UPDATE deliveries SET lease_owner = p_owner, lease_expires_at = p_until, attempts = deliveries.attempts + 1
  WHERE deliveries.id = ANY (ARRAY(SELECT chosen.id FROM chosen))
  RETURNING deliveries.id, deliveries.attempts, deliveries.account_id, deliveries.target_url,
    COALESCE(deliveries.payload::text,
      (SELECT (e.payload || jsonb_build_object('id', deliveries.id))::text FROM events AS e WHERE e.id = deliveries.event_id)),
    (SELECT jsonb_build_object('call_id', o.call_id, 'created_at', deliveries.created_at, 'body', o.body)
      FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id),
    (SELECT s.removed_at IS NOT NULL FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    deliveries.subscription_id,
    (SELECT CASE
        WHEN s.removed_at IS NOT NULL AND s.removed_reason = 'gone' THEN 'gone'
        WHEN s.removed_at IS NOT NULL THEN 'removed'
        WHEN s.disabled_at IS NOT NULL THEN 'disabled'
        WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing'
        ELSE 'active' END
      FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    (SELECT s.destination_id FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    COALESCE(deliveries.traceparent,
      (SELECT o.traceparent FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id)),
    deliveries.target_origin;
END
$fn$
`,

  `CREATE OR REPLACE FUNCTION deliveries_finish_2(p_owner text, p_jobs jsonb, p_log jsonb)
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
    FROM deliveries AS d
    WHERE d.id = ANY (ARRAY(SELECT changed.id FROM changed WHERE changed.stored IS NOT NULL)) AND d.final_attempt IS NOT NULL
    UNION ALL
    SELECT a.delivery_id, a.attempt, a.started_at, a.status_code, a.duration_ms, a.error_class, a.error, a.result
    FROM attempt AS a
    WHERE NOT EXISTS (SELECT 1 FROM changed WHERE changed.id = a.delivery_id AND changed.stored = a.attempt AND changed.status = a.result)
  )
  SELECT changed.id FROM changed;
END
$fn$`
])
