/**
 * Receiver origins held while they fail (issue 40: back in seconds, quiet
 * while down). The health of an origin (a webhook receiver's scheme, host
 * and port, or a broker host: the fair queue's key) is a row every replica
 * reads and a restart keeps.
 *
 * - `origin_health`: consecutive failed attempts of distinct deliveries
 *   (`streak`; a message that alone fails repeats `last_failed_delivery`
 *   and does not grow it), and once the origin is held, since when
 *   (`failing_since`), when its next probe is due (`next_probe_at`, at
 *   `probe_interval_ms`) and who holds the probe now (`probe_owner`,
 *   `probe_until`). A success of the origin deletes the row.
 * - `deliveries.held_attempts`: the attempts a delivery made as its held
 *   origin's probe, or that failed once its origin was held. The retry
 *   schedule steps over the others alone, so an outage does not spend a
 *   delivery's schedule.
 * - `deliveries_claim_fairly_4`: 0024's claim, where a held origin takes no
 *   work but one due delivery, its probe, claimed by one claimer at a time
 *   across replicas; it answers `held_attempts` and `origin_state` (`probe`,
 *   `suspect` while the origin has a streak, NULL) with each row.
 * - `deliveries_finish_3`: 0024's finish, which also writes `held_attempts`.
 * - `call_outcome_intake_4`, replaced in place with the same arguments and
 *   answers: a delivery to a held origin is not handed to a runner at intake;
 *   the deliveries it hands carry the claim's new columns.
 *
 * The previous release's functions (`deliveries_claim_fairly_3`,
 * `deliveries_finish_2`) stay: its replicas keep delivering as before
 * during an upgrade, without holds.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE origin_health (
    origin text PRIMARY KEY,
    streak integer NOT NULL DEFAULT 0 CHECK (streak >= 0),
    streak_started_at timestamptz NOT NULL,
    last_failed_delivery uuid,
    last_error text CHECK (length(last_error) <= 500),
    failing_since timestamptz,
    next_probe_at timestamptz,
    probe_interval_ms integer,
    probe_owner text,
    probe_until timestamptz,
    probes integer NOT NULL DEFAULT 0,
    CHECK (failing_since IS NULL OR next_probe_at IS NOT NULL)
  )`,
  `ALTER TABLE deliveries ADD COLUMN held_attempts integer NOT NULL DEFAULT 0`,

  `CREATE FUNCTION deliveries_claim_fairly_4(
  p_owner text, p_at timestamptz, p_until timestamptz, p_limit integer, p_max_per_key integer, p_room jsonb
) RETURNS TABLE (
  id uuid, attempts integer, account_id uuid, target_url text, body text, outcome jsonb, subscription_removed boolean,
  subscription_id uuid, subscription_state text, destination_id uuid, held_attempts integer, origin_state text,
  traceparent text, job_fair_key text
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
  v_known text[];
  v_held text[];
  v_probes text[] := '{}';
BEGIN
  -- The origins with a health row (a few at most): held ones take no work but their probe.
  SELECT COALESCE(array_agg(h.origin), '{}'), COALESCE(array_agg(h.origin) FILTER (WHERE h.failing_since IS NOT NULL), '{}')
  INTO v_known, v_held FROM origin_health AS h;
  IF cardinality(v_held) > 0 THEN
    -- One probe per held origin across replicas: its row stays locked until this claim commits, with its probe lease set.
    SELECT COALESCE(array_agg(p.origin), '{}') INTO v_probes FROM (
      SELECT h.origin FROM origin_health AS h
      WHERE h.failing_since IS NOT NULL AND h.next_probe_at <= p_at AND (h.probe_until IS NULL OR h.probe_until <= p_at)
      FOR UPDATE SKIP LOCKED
    ) AS p;
  END IF;
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
      LIMIT CASE
        WHEN k.key = ANY (v_held) THEN CASE WHEN k.key = ANY (v_probes) THEN LEAST(1, GREATEST(p_limit, 0)) ELSE 0 END
        ELSE GREATEST(LEAST(COALESCE(room.room, p_max_per_key), p_limit), 0) END
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
  ), claimed AS (
  UPDATE deliveries SET lease_owner = p_owner, lease_expires_at = p_until, attempts = deliveries.attempts + 1
  WHERE deliveries.id = ANY (ARRAY(SELECT chosen.id FROM chosen))
  RETURNING deliveries.id AS c_id, deliveries.attempts AS c_attempts, deliveries.account_id AS c_account_id,
    deliveries.target_url AS c_target_url,
    COALESCE(deliveries.payload::text,
      (SELECT (e.payload || jsonb_build_object('id', deliveries.id))::text FROM events AS e WHERE e.id = deliveries.event_id))
      AS c_body,
    (SELECT jsonb_build_object('call_id', o.call_id, 'created_at', deliveries.created_at, 'body', o.body)
      FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id) AS c_outcome,
    (SELECT s.removed_at IS NOT NULL FROM subscriptions AS s WHERE s.id = deliveries.subscription_id) AS c_removed,
    deliveries.subscription_id AS c_subscription_id,
    (SELECT CASE
        WHEN s.removed_at IS NOT NULL AND s.removed_reason = 'gone' THEN 'gone'
        WHEN s.removed_at IS NOT NULL THEN 'removed'
        WHEN s.disabled_at IS NOT NULL THEN 'disabled'
        WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing'
        ELSE 'active' END
      FROM subscriptions AS s WHERE s.id = deliveries.subscription_id) AS c_state,
    (SELECT s.destination_id FROM subscriptions AS s WHERE s.id = deliveries.subscription_id) AS c_destination_id,
    deliveries.held_attempts AS c_held_attempts,
    CASE WHEN deliveries.target_origin = ANY (v_probes) THEN 'probe'
      WHEN deliveries.target_origin = ANY (v_known) THEN 'suspect' END AS c_origin_state,
    COALESCE(deliveries.traceparent,
      (SELECT o.traceparent FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id))
      AS c_traceparent,
    deliveries.target_origin AS c_key
  ), probed AS (
    UPDATE origin_health AS h SET probe_owner = p_owner, probe_until = p_until, probes = h.probes + 1
    WHERE h.origin = ANY (v_probes) AND h.origin IN (SELECT claimed.c_key FROM claimed)
  )
  SELECT c_id, c_attempts, c_account_id, c_target_url, c_body, c_outcome, c_removed, c_subscription_id, c_state,
    c_destination_id, c_held_attempts, c_origin_state, c_traceparent, c_key FROM claimed;
END
$fn$`,

  `CREATE FUNCTION deliveries_finish_3(p_owner text, p_jobs jsonb, p_log jsonb)
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
      held_attempts = CASE WHEN job.job_raw -> 'held_attempts' IS NULL THEN deliveries.held_attempts ELSE job.held_attempts END,
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
$fn$`,

  `CREATE OR REPLACE FUNCTION call_outcome_intake_4(
    p_call_id text, p_account_id uuid, p_tenant_id text, p_classification text, p_body jsonb,
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
  v_handed jsonb;
  v_origins text[];
BEGIN
  v_facts := call_outcome_facts_2(p_account_id, p_tenant_id);
  IF v_facts IS DISTINCT FROM p_decided_on THEN
    RETURN QUERY SELECT false, false, v_facts, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::text[];
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM call_outcomes AS o WHERE o.call_id = p_call_id) THEN
    RETURN QUERY SELECT true, false, NULL::jsonb, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::text[];
    RETURN;
  END IF;
  IF p_event IS NOT NULL THEN
    SELECT c.until_seq, c.matching INTO v_until, v_matching FROM event_cut(p_account_id, p_kind) AS c;
  END IF;
  BEGIN
    INSERT INTO call_outcomes AS o (call_id, account_id, tenant_id, classification, body, route, route_reason,
      event_kind, event_deliveries, event_fanned_out_at, traceparent)
    VALUES (p_call_id, p_account_id, p_tenant_id, p_classification, p_body, p_route, p_route_reason,
      CASE WHEN p_event IS NOT NULL THEN p_kind END, CASE WHEN p_event IS NOT NULL THEN v_matching END,
      CASE WHEN p_event IS NOT NULL THEN now() END, p_event ->> 'traceparent');
  EXCEPTION WHEN unique_violation THEN
    -- The same call id accepted meanwhile by another statement: a repeat.
    RETURN QUERY SELECT true, false, NULL::jsonb, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::text[];
    RETURN;
  END;
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
  -- Few: the deliveries in this statement, rendered from the outcome when sent. The cut was read just above, so
  -- at most v_matching rows (one removed since is skipped) and the room covers them all or none is leased.
  v_leased := p_owner IS NOT NULL AND v_matching <= COALESCE(p_room, 0);
  -- A receiver origin held as failing gets its deliveries through its probe alone: none is handed to a runner.
  IF v_leased AND EXISTS (SELECT 1 FROM origin_health AS h WHERE h.failing_since IS NOT NULL) THEN
    v_leased := NOT EXISTS (
      SELECT 1 FROM subscriptions AS s JOIN origin_health AS h
        ON h.origin = lower(COALESCE(substring(s.target_url FROM '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*'), ''))
      WHERE h.failing_since IS NOT NULL AND s.account_id = p_account_id AND s.seq <= v_until
        AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (p_kind, 'all'));
  END IF;
  WITH batch AS (
    SELECT s.id, s.target_url, s.seq, s.destination_id,
      CASE WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing' ELSE 'active' END AS state
    FROM subscriptions AS s
    WHERE s.account_id = p_account_id AND s.seq <= v_until
      AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (p_kind, 'all')
    ORDER BY s.seq
  ), queued AS (
    INSERT INTO deliveries AS d (id, account_id, subscription_id, outcome_event, event, call_id,
      contact_external_id, appointment_external_id, target_url, created_at, next_attempt_at, lease_owner,
      lease_expires_at, attempts)
    SELECT gen_random_uuid(), p_account_id, b.id, true, p_kind, p_call_id,
      p_event ->> 'contact_external_id', p_event ->> 'appointment_external_id', b.target_url,
      (p_event ->> 'created_at')::timestamptz, (p_event ->> 'created_at')::timestamptz,
      CASE WHEN v_leased THEN p_owner END, CASE WHEN v_leased THEN p_until END, CASE WHEN v_leased THEN 1 ELSE 0 END
    FROM batch AS b ORDER BY b.seq
    RETURNING d.id, d.attempts, d.target_url, d.subscription_id, d.target_origin
  )
  SELECT
    CASE WHEN v_leased THEN jsonb_agg(jsonb_build_object(
      'id', q.id, 'attempts', q.attempts, 'account_id', p_account_id, 'target_url', q.target_url, 'body', NULL,
      'outcome', NULL, 'subscription_removed', false, 'subscription_id', q.subscription_id, 'subscription_state', b.state,
      'destination_id', b.destination_id, 'traceparent', p_event -> 'traceparent', 'job_fair_key', q.target_origin,
      -- The claim's columns of this migration too: none of these origins is held, one may have a streak under way.
      'held_attempts', 0,
      'origin_state', (SELECT 'suspect'::text FROM origin_health AS h WHERE h.origin = q.target_origin))) END,
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
