/**
 * The outcome intake as functions. Accepting an outcome that is stored only,
 * or announced at once, is one statement (Outcomes' `insertAnnounced`); sent
 * as SQL text it was parsed and planned on every call, and at 100 outcomes/s
 * it was PostgreSQL's largest cost. PL/pgSQL plans a function's statements
 * once per session and keeps the plans. The rules are unchanged:
 *
 * - `call_outcome_facts(account, tenant, kind)`: what the route of an outcome
 *   needs, as one JSON value: the account's mode, its routing rules (NULLs: the
 *   defaults), whether the tenant has a bridge, and the subscriptions an event
 *   of `kind` goes to (active, not disabled, subscribed to the kind or to
 *   all), in insertion order. NULL: no such account. STABLE, so it reads in
 *   the snapshot of the statement that calls it.
 * - `call_outcome_intake(...)`: reads the facts again and, in the same
 *   snapshot, writes nothing unless they equal `decided_on` (it answers the
 *   facts as they are, `same` false); else the outcome row (nothing when the
 *   call id was already accepted, `inserted` false), its deliveries (a JSON
 *   array of `deliveries` rows) and the delivery worker's wake-up on
 *   `channel` (sent at COMMIT) — one statement, all or nothing.
 *
 * Table and column references are qualified: in PL/pgSQL an unqualified name
 * that is also an output column would be ambiguous.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE FUNCTION call_outcome_facts(p_account_id uuid, p_tenant_id text, p_kind text)
  RETURNS jsonb
  LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  RETURN (
    SELECT jsonb_build_object(
      'mode', a.mode, 'crm_push', rules.crm_push, 'classifications', rules.classifications,
      'connected', EXISTS (SELECT 1 FROM connections AS c WHERE c.account_id = a.id AND c.tenant_id = p_tenant_id),
      'subscriptions', (SELECT COALESCE(jsonb_agg(jsonb_build_object('id', s.id, 'targetUrl', s.target_url) ORDER BY s.seq), '[]'::jsonb)
        FROM subscriptions AS s
        WHERE s.account_id = a.id AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (p_kind, 'all')))
    FROM accounts AS a LEFT JOIN routing_rules AS rules ON rules.account_id = a.id
    WHERE a.id = p_account_id
  );
END
$fn$`,

  `CREATE FUNCTION call_outcome_intake(
    p_call_id text, p_account_id uuid, p_tenant_id text, p_classification text, p_body jsonb, p_body_digest text,
    p_route text, p_route_reason text, p_kind text, p_announced boolean, p_decided_on jsonb, p_deliveries jsonb,
    p_channel text)
  RETURNS TABLE (same boolean, inserted boolean, facts jsonb, notified boolean)
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
      appointment_external_id, target_url, payload, created_at, next_attempt_at, traceparent)
    SELECT r.id, r.account_id, r.subscription_id, r.event, r.call_id, r.source, r.contact_external_id,
      r.appointment_external_id, r.target_url, r.payload, r.created_at, r.next_attempt_at, r.traceparent
    FROM jsonb_populate_recordset(NULL::deliveries, p_deliveries) AS r
    WHERE EXISTS (SELECT 1 FROM outcome)
    RETURNING d.id
  )
  SELECT guard.same, EXISTS (SELECT 1 FROM outcome),
    CASE WHEN guard.same THEN NULL ELSE guard.current END,
    (SELECT pg_notify(p_channel, p_kind)::text FROM queued LIMIT 1) IS NOT NULL
  FROM guard;
END
$fn$`
])
