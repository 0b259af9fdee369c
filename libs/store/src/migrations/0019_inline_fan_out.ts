/**
 * An outcome with few subscriptions is fanned out in its intake (issue 35).
 * Since migration 0017 the intake writes the outcome and its event and the
 * fan-out runner writes the deliveries: for the common account (one hook)
 * that is the intake, the fan-out's claim and statement, a notification and
 * the delivery runner's claim before the POST, three commits an outcome
 * where the release before (0015) had about one and a half.
 *
 * `call_outcome_intake_3`: 0017's `call_outcome_intake_2` that, when the
 * subscriptions the event goes to number at most `p_inline` (the caller's
 * named constant: it bounds what one intake writes, so the intake still
 * costs the same whatever the account's size), inserts in the same
 * statement the event already finished (`done`, the payload once) and its
 * deliveries, as `event_fan_out_2` would (one id per (event, subscription)
 * under `deliveries_event_subscription_idx`, only subscriptions cut at
 * acceptance, no payload of their own). They are leased to the delivery
 * runner of the caller's process when it set aside room for all of them
 * (`p_room` slots for `p_owner` until `p_until`, attempt 1, as a claim
 * counts it) and answered in the claim's shape (`handed`), exactly as 0015
 * handed its deliveries: no notification, no claim; if that process dies,
 * the lease ends and any runner claims them (at least once, the same id).
 * Without that room they are inserted unleased and the delivery runners
 * notified. `origins` answers the receiver origins of the deliveries
 * written inline, the room the caller asks for next time.
 * Above `p_inline` it does what `call_outcome_intake_2` does: the event
 * pending, leased to the fan-out runner when `p_event_owner` is given
 * (answered in `event_handed`), else the fan-out runners notified.
 * `call_outcome_intake_2` stays for replicas of the previous release.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE FUNCTION call_outcome_intake_3(
    p_call_id text, p_account_id uuid, p_tenant_id text, p_classification text, p_body jsonb, p_body_digest text,
    p_route text, p_route_reason text, p_kind text, p_decided_on jsonb, p_event jsonb, p_inline integer,
    p_event_channel text, p_event_owner text, p_event_until timestamptz,
    p_channel text, p_owner text, p_until timestamptz, p_room integer)
  RETURNS TABLE (same boolean, inserted boolean, facts jsonb, deliveries integer, event_handed jsonb, handed jsonb,
    origins text[])
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  v_facts jsonb;
  v_until bigint := 0;
  v_matching integer := 0;
  v_leased boolean;
  v_event uuid;
  v_handed jsonb;
  v_origins text[];
BEGIN
  v_facts := call_outcome_facts_2(p_account_id, p_tenant_id);
  IF v_facts IS DISTINCT FROM p_decided_on THEN
    RETURN QUERY SELECT false, false, v_facts, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::text[];
    RETURN;
  END IF;
  IF p_event IS NOT NULL THEN
    SELECT c.until_seq, c.matching INTO v_until, v_matching FROM event_cut(p_account_id, p_kind) AS c;
  END IF;
  INSERT INTO call_outcomes AS o (call_id, account_id, tenant_id, classification, body, body_digest, route, route_reason,
    event_kind, event_deliveries, event_fanned_out_at)
  VALUES (p_call_id, p_account_id, p_tenant_id, p_classification, p_body, p_body_digest, p_route, p_route_reason,
    CASE WHEN p_event IS NOT NULL THEN p_kind END, CASE WHEN p_event IS NOT NULL THEN v_matching END,
    CASE WHEN p_event IS NOT NULL THEN now() END)
  ON CONFLICT (call_id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT true, false, NULL::jsonb, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::text[];
    RETURN;
  END IF;
  IF p_event IS NULL OR v_matching = 0 THEN
    RETURN QUERY SELECT true, true, NULL::jsonb, CASE WHEN p_event IS NULL THEN NULL ELSE 0 END, NULL::jsonb, NULL::jsonb,
      NULL::text[];
    RETURN;
  END IF;
  IF v_matching > p_inline THEN
    PERFORM event_queue(p_event, v_until, 'pending', p_event_owner,
      CASE WHEN p_event_owner IS NOT NULL THEN p_event_until END);
    IF p_event_owner IS NULL THEN
      PERFORM pg_notify(p_event_channel, p_kind);
      RETURN QUERY SELECT true, true, NULL::jsonb, v_matching, NULL::jsonb, NULL::jsonb, NULL::text[];
      RETURN;
    END IF;
    RETURN QUERY SELECT true, true, NULL::jsonb, v_matching,
      jsonb_build_array(jsonb_build_object('id', p_event ->> 'id', 'attempts', 1, 'account_id', p_account_id,
        'traceparent', p_event -> 'traceparent')), NULL::jsonb, NULL::text[];
    RETURN;
  END IF;
  -- Few: the event finished and its deliveries in this statement. The cut was read just above, so at most
  -- v_matching rows (one removed since is skipped) and the room covers them all or none is leased.
  v_leased := p_owner IS NOT NULL AND v_matching <= COALESCE(p_room, 0);
  v_event := (p_event ->> 'id')::uuid;
  PERFORM event_queue(p_event, v_until, 'done', NULL, NULL);
  WITH batch AS (
    SELECT s.id, s.target_url, s.seq, s.destination_id,
      CASE WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing' ELSE 'active' END AS state
    FROM subscriptions AS s
    WHERE s.account_id = p_account_id AND s.seq <= v_until
      AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (p_kind, 'all')
    ORDER BY s.seq
  ), queued AS (
    INSERT INTO deliveries AS d (id, account_id, subscription_id, event_id, event, call_id, source, contact_external_id,
      appointment_external_id, target_url, created_at, next_attempt_at, traceparent, lease_owner, lease_expires_at, attempts)
    SELECT gen_random_uuid(), p_account_id, b.id, v_event, p_kind, p_event ->> 'call_id', p_event ->> 'source',
      p_event ->> 'contact_external_id', p_event ->> 'appointment_external_id', b.target_url,
      (p_event ->> 'created_at')::timestamptz, (p_event ->> 'created_at')::timestamptz, p_event ->> 'traceparent',
      CASE WHEN v_leased THEN p_owner END, CASE WHEN v_leased THEN p_until END, CASE WHEN v_leased THEN 1 ELSE 0 END
    FROM batch AS b ORDER BY b.seq
    ON CONFLICT (event_id, subscription_id) WHERE event_id IS NOT NULL DO NOTHING
    RETURNING d.id, d.attempts, d.target_url, d.subscription_id, d.traceparent, d.target_origin
  )
  SELECT
    CASE WHEN v_leased THEN jsonb_agg(jsonb_build_object(
      'id', q.id, 'attempts', q.attempts, 'account_id', p_account_id, 'target_url', q.target_url,
      'body', ((p_event -> 'payload') || jsonb_build_object('id', q.id))::text,
      'subscription_removed', false, 'subscription_id', q.subscription_id, 'subscription_state', b.state,
      'destination_id', b.destination_id, 'traceparent', q.traceparent, 'job_fair_key', q.target_origin)) END,
    array_agg(q.target_origin)
  INTO v_handed, v_origins
  FROM queued AS q JOIN batch AS b ON b.id = q.subscription_id;
  IF NOT v_leased AND v_origins IS NOT NULL THEN
    PERFORM pg_notify(p_channel, p_kind);
  END IF;
  RETURN QUERY SELECT true, true, NULL::jsonb, v_matching, NULL::jsonb, v_handed, v_origins;
END
$fn$`
])
