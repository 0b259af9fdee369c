/**
 * Fewer writes per delivery. A delivery row is written three times (queued,
 * claimed, finished), and every write that is not a HOT update adds an entry
 * to each of the table's indexes whose predicate the new row meets.
 *
 * - Free room in each page (fillfactor 80): a claim or a heartbeat changes
 *   no indexed column, so with room on the page it is a HOT update that
 *   touches no index at all.
 * - The subscription index keeps the pending rows only: ending a
 *   subscription's pending deliveries is its one reader (subscriptions are
 *   never deleted, so their foreign key needs no index here); a finished
 *   delivery no longer adds an entry to it.
 * - An attempt row no longer checks its delivery with a foreign key: it is
 *   written in the statement that finishes its delivery (which exists, its
 *   lease held), and retention deletes a delivery's attempts with it in one
 *   statement. The check cost a trigger and a row lock per attempt.
 * - The fair claim of a delivery worker is a function: PostgreSQL plans a
 *   function's statements once per session (a generic plan, the same for
 *   any time and room), where the statement sent as text was parsed and
 *   planned again on every claim. It is JobQueue's fair claim over this
 *   table, with the worker's select list (`Deliveries.table`).
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries SET (fillfactor = 80)`,
  `DROP INDEX deliveries_subscription_id_idx`,
  `CREATE INDEX deliveries_subscription_pending_idx ON deliveries (subscription_id) WHERE status = 'pending'`,
  `ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_id_fkey`,
  `CREATE FUNCTION deliveries_claim_fairly(
  p_owner text, p_at timestamptz, p_until timestamptz, p_limit integer, p_max_per_key integer, p_room jsonb
) RETURNS TABLE (
  id uuid, attempts integer, account_id uuid, target_url text, body text, subscription_removed boolean,
  subscription_id uuid, subscription_state text, traceparent text, job_fair_key text
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
      WHERE d.id = pick.id AND d.status = 'pending' AND d.next_attempt_at <= p_at
        AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= p_at)
      FOR UPDATE SKIP LOCKED
    ) AS locked
  )
  UPDATE deliveries SET lease_owner = p_owner, lease_expires_at = p_until, attempts = deliveries.attempts + 1
  FROM chosen WHERE deliveries.id = chosen.id
  RETURNING deliveries.id, deliveries.attempts, deliveries.account_id, deliveries.target_url, deliveries.payload::text,
    (SELECT s.removed_at IS NOT NULL FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    deliveries.subscription_id,
    (SELECT CASE
        WHEN s.removed_at IS NOT NULL AND s.removed_reason = 'gone' THEN 'gone'
        WHEN s.removed_at IS NOT NULL THEN 'removed'
        WHEN s.disabled_at IS NOT NULL THEN 'disabled'
        WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing'
        ELSE 'active' END
      FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    deliveries.traceparent, deliveries.target_origin;
END
$fn$
`
])
