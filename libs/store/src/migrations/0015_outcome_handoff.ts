/**
 * The outcome intake hands its deliveries to the delivery runner of the same
 * process. Before, an accepted outcome's deliveries were inserted unleased
 * and the intake notified the runners (pg_notify): a runner heard it on its
 * LISTEN connection and claimed them with a statement of its own, two more
 * wake-ups of PostgreSQL and a round trip between acceptance and the POST.
 * When the replica accepting the outcome runs a delivery runner with room
 * for them, the intake now inserts them leased to that runner (attempt 1, as
 * a claim would count it) and answers them as a claim does; it then notifies
 * nobody. Leased by the columns like any claimed row: if that process dies,
 * the lease ends and another runner claims them (at least once, same id).
 *
 * `call_outcome_intake(..., p_owner, p_until)`: migration 0014's function
 * with the owner and lease end (both NULL: unleased and notified, exactly as
 * before), answering `handed`, a JSON array of the leased rows with the
 * columns of `deliveries_claim_fairly` (NULL when nothing was leased). The
 * 13-argument function stays for replicas of the previous version during an
 * upgrade.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE FUNCTION call_outcome_intake(
    p_call_id text, p_account_id uuid, p_tenant_id text, p_classification text, p_body jsonb, p_body_digest text,
    p_route text, p_route_reason text, p_kind text, p_announced boolean, p_decided_on jsonb, p_deliveries jsonb,
    p_channel text, p_owner text, p_until timestamptz)
  RETURNS TABLE (same boolean, inserted boolean, facts jsonb, notified boolean, handed jsonb)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  RETURN QUERY
  WITH current_facts AS (
    SELECT call_outcome_facts(p_account_id, p_tenant_id, p_kind) AS current
  ), guard AS (
    SELECT f.current = p_decided_on AS same, f.current FROM current_facts AS f
  ), outcome AS (
    INSERT INTO call_outcomes AS o (call_id, account_id, tenant_id, classification, body, body_digest, route, route_reason,
      event_kind, event_deliveries, event_fanned_out_at)
    SELECT p_call_id, p_account_id, p_tenant_id, p_classification, p_body, p_body_digest, p_route, p_route_reason,
      CASE WHEN p_announced THEN p_kind END, CASE WHEN p_announced THEN jsonb_array_length(p_deliveries) END,
      CASE WHEN p_announced THEN now() END
    FROM guard WHERE guard.same
    ON CONFLICT (call_id) DO NOTHING
    RETURNING o.call_id
  ), queued AS (
    INSERT INTO deliveries AS d (id, account_id, subscription_id, event, call_id, source, contact_external_id,
      appointment_external_id, target_url, payload, created_at, next_attempt_at, traceparent,
      lease_owner, lease_expires_at, attempts)
    SELECT r.id, r.account_id, r.subscription_id, r.event, r.call_id, r.source, r.contact_external_id,
      r.appointment_external_id, r.target_url, r.payload, r.created_at, r.next_attempt_at, r.traceparent,
      p_owner, CASE WHEN p_owner IS NOT NULL THEN p_until END, CASE WHEN p_owner IS NOT NULL THEN 1 ELSE 0 END
    FROM jsonb_populate_recordset(NULL::deliveries, p_deliveries) AS r
    WHERE EXISTS (SELECT 1 FROM outcome)
    RETURNING d.id, d.attempts, d.account_id, d.target_url, d.payload, d.subscription_id, d.traceparent, d.target_origin
  )
  SELECT guard.same, EXISTS (SELECT 1 FROM outcome),
    CASE WHEN guard.same THEN NULL ELSE guard.current END,
    CASE WHEN p_owner IS NULL THEN (SELECT pg_notify(p_channel, p_kind)::text FROM queued LIMIT 1) IS NOT NULL ELSE false END,
    CASE WHEN p_owner IS NULL THEN NULL ELSE (
      SELECT jsonb_agg(jsonb_build_object(
        'id', q.id, 'attempts', q.attempts, 'account_id', q.account_id, 'target_url', q.target_url, 'body', q.payload::text,
        'subscription_removed', (SELECT s.removed_at IS NOT NULL FROM subscriptions AS s WHERE s.id = q.subscription_id),
        'subscription_id', q.subscription_id,
        'subscription_state', (SELECT CASE
            WHEN s.removed_at IS NOT NULL AND s.removed_reason = 'gone' THEN 'gone'
            WHEN s.removed_at IS NOT NULL THEN 'removed'
            WHEN s.disabled_at IS NOT NULL THEN 'disabled'
            WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing'
            ELSE 'active' END
          FROM subscriptions AS s WHERE s.id = q.subscription_id),
        'traceparent', q.traceparent, 'job_fair_key', q.target_origin))
      FROM queued AS q) END
  FROM guard;
END
$fn$`
])
