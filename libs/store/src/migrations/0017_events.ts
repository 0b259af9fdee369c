/**
 * Events: accepting an outcome no longer writes one delivery per
 * subscription. It writes the outcome and its event (one row, the payload
 * once) and returns; the fan-out worker turns the event into deliveries in
 * batches. Intake costs the same whatever the number of subscriptions.
 *
 * - `events` is a JobQueue table (`pending` → `done`), with the payload
 *   once per event (without its `id`: each delivery's id is the `id` its
 *   receiver sees, the `webhook-id`) and the columns a delivery copies.
 *   Mutable columns come first and the payload last, and half of each page
 *   is left free (fillfactor 50), so the update that finishes an event
 *   lands on its own page and its WAL record carries little beyond the
 *   changed bytes (PostgreSQL logs a same-page update without the prefix
 *   and suffix it shares with the old row; on another page, the whole row).
 *   No foreign keys: each would lock the account's row (a WAL record) per
 *   event; the intake writes events only for an account it just read, and
 *   retention deletes an event after its deliveries.
 * - Who gets an event is fixed at acceptance: the matching subscriptions
 *   whose `seq` is at most `fanout_until`, the highest `seq` among them when
 *   the outcome was accepted. A subscription created afterwards has a
 *   higher `seq` and gets nothing; a removed or disabled one is skipped when
 *   the fan-out reaches it, so one removed between intake and fan-out gets
 *   nothing either. (`seq` rather than `created_at`: the cut and the cursor
 *   are then one column, walked by one index, whatever the clocks.)
 * - The fan-out walks those subscriptions in `seq` order, a batch per
 *   statement (`event_fan_out`), after `fanout_after`, the cursor it
 *   advances when a batch was full. A delivery of an event is unique per
 *   subscription (`deliveries_event_subscription_idx`, inserted with ON
 *   CONFLICT DO NOTHING): a fan-out redone after a crash (the event's lease
 *   ended, another worker claimed it) never gives a pair a second id.
 * - A delivery of an event has no payload of its own: the body sent is the
 *   event's payload with the delivery's id (`jsonb`'s text form, as the
 *   stored payload's was). `deliveries_claim_fairly_2` is replaced in place
 *   to read it so, so a replica of the previous release that still claims
 *   with it sends these deliveries too; a delivery that carries its payload
 *   (written before, or by such a replica, or a test event) sends it as before.
 * - `call_outcome_facts_2` is 0014's facts without the subscription list
 *   (its size grew with the subscriptions); `call_outcome_intake_2` writes
 *   the outcome and its event in one statement, the event leased to the
 *   fan-out runner of the same process when it has room (handed over as a
 *   claim returns it, no notification), else notifying the fan-out runners.
 *   It answers how many subscriptions the event goes to. The previous
 *   functions stay for replicas of the previous release during an upgrade.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE events (
    id uuid PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    lease_owner text,
    lease_expires_at timestamptz,
    last_error text,
    fanout_after bigint NOT NULL DEFAULT 0,
    fanout_until bigint NOT NULL,
    account_id uuid NOT NULL,
    kind text NOT NULL CHECK (kind IN ('lead', 'booking')),
    call_id text NOT NULL,
    source text NOT NULL,
    contact_external_id text NOT NULL,
    appointment_external_id text,
    created_at timestamptz NOT NULL,
    traceparent text,
    payload_dropped_at timestamptz,
    payload jsonb
  ) WITH (fillfactor = 50)`,
  `CREATE INDEX events_due_idx ON events (next_attempt_at) WHERE status = 'pending'`,
  // Retention: finished events oldest first (deleted after their deliveries; payloads dropped sooner).
  `CREATE INDEX events_finished_idx ON events (created_at) WHERE status <> 'pending'`,

  `ALTER TABLE deliveries ADD COLUMN event_id uuid`,
  `CREATE UNIQUE INDEX deliveries_event_subscription_idx ON deliveries (event_id, subscription_id) WHERE event_id IS NOT NULL`,
  // The fan-out's walk: an account's active subscriptions in insertion order.
  `CREATE INDEX subscriptions_fanout_idx ON subscriptions (account_id, seq) WHERE removed_at IS NULL AND disabled_at IS NULL`,

  `CREATE FUNCTION event_cut(p_account_id uuid, p_kind text)
  RETURNS TABLE (until_seq bigint, matching integer)
  LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  RETURN QUERY
  SELECT COALESCE(max(s.seq), 0), count(*)::integer FROM subscriptions AS s
  WHERE s.account_id = p_account_id AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (p_kind, 'all');
END
$fn$`,

  `CREATE FUNCTION event_queue(p_event jsonb, p_until_seq bigint, p_status text, p_owner text, p_lease_until timestamptz)
  RETURNS void
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  INSERT INTO events AS e (id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, fanout_until, account_id,
    kind, call_id, source, contact_external_id, appointment_external_id, created_at, traceparent, payload)
  SELECT r.id, p_status, CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END, r.created_at, p_owner, p_lease_until, p_until_seq,
    r.account_id, r.kind, r.call_id, r.source, r.contact_external_id, r.appointment_external_id, r.created_at,
    r.traceparent, r.payload
  FROM jsonb_populate_record(NULL::events, p_event) AS r;
END
$fn$`,

  // One batch of an event's fan-out: the next `p_limit` subscriptions (NULL: all) after the cursor, under
  // `p_owner`'s lease (NULL: no lease, the caller's own transaction wrote the event); the runners of
  // `p_channel` are woken at COMMIT when deliveries were queued.
  `CREATE FUNCTION event_fan_out(p_event uuid, p_owner text, p_limit integer, p_channel text)
  RETURNS TABLE (ids uuid[], more boolean, held boolean)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  e events%ROWTYPE;
  v_ids uuid[];
  v_count integer;
  v_last bigint;
BEGIN
  SELECT * INTO e FROM events AS v
  WHERE v.id = p_event AND (p_owner IS NULL OR (v.lease_owner = p_owner AND v.status = 'pending'));
  IF NOT FOUND THEN
    RETURN QUERY SELECT ARRAY[]::uuid[], false, false;
    RETURN;
  END IF;
  WITH batch AS (
    SELECT s.id, s.target_url, s.seq FROM subscriptions AS s
    WHERE s.account_id = e.account_id AND s.seq > e.fanout_after AND s.seq <= e.fanout_until
      AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (e.kind, 'all')
    ORDER BY s.seq LIMIT p_limit
  ), queued AS (
    INSERT INTO deliveries AS d (id, account_id, subscription_id, event_id, event, call_id, source, contact_external_id,
      appointment_external_id, target_url, created_at, next_attempt_at, traceparent)
    SELECT gen_random_uuid(), e.account_id, b.id, e.id, e.kind, e.call_id, e.source, e.contact_external_id,
      e.appointment_external_id, b.target_url, e.created_at, e.created_at, e.traceparent
    FROM batch AS b ORDER BY b.seq
    ON CONFLICT (event_id, subscription_id) WHERE event_id IS NOT NULL DO NOTHING
    RETURNING d.id
  )
  SELECT (SELECT array_agg(q.id) FROM queued AS q), (SELECT count(*) FROM batch), (SELECT max(b.seq) FROM batch AS b)
  INTO v_ids, v_count, v_last;
  -- Only a full batch moves the cursor: after the last one the event is finished (redone, it only conflicts).
  IF v_count = p_limit THEN
    UPDATE events AS v SET fanout_after = v_last WHERE v.id = e.id;
  END IF;
  IF v_ids IS NOT NULL AND p_channel IS NOT NULL THEN
    PERFORM pg_notify(p_channel, e.kind);
  END IF;
  RETURN QUERY SELECT COALESCE(v_ids, ARRAY[]::uuid[]), COALESCE(v_count = p_limit, false), true;
END
$fn$`,

  // An event fanned out at once, in the caller's transaction (a worker that announces a call): the event
  // (finished) and all its deliveries; their ids, none when no subscription matches (and no event then).
  `CREATE FUNCTION event_fan_out_now(p_event jsonb, p_channel text)
  RETURNS uuid[]
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  v_until bigint;
  v_matching integer;
  v_ids uuid[];
BEGIN
  SELECT c.until_seq, c.matching INTO v_until, v_matching FROM event_cut((p_event ->> 'account_id')::uuid, p_event ->> 'kind') AS c;
  IF v_matching = 0 THEN
    RETURN ARRAY[]::uuid[];
  END IF;
  PERFORM event_queue(p_event, v_until, 'done', NULL, NULL);
  SELECT f.ids INTO v_ids FROM event_fan_out((p_event ->> 'id')::uuid, NULL, NULL, p_channel) AS f;
  RETURN v_ids;
END
$fn$`,

  `CREATE FUNCTION call_outcome_facts_2(p_account_id uuid, p_tenant_id text)
  RETURNS jsonb
  LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
  RETURN (
    SELECT jsonb_build_object(
      'mode', a.mode, 'crm_push', rules.crm_push, 'classifications', rules.classifications,
      'connected', EXISTS (SELECT 1 FROM connections AS c WHERE c.account_id = a.id AND c.tenant_id = p_tenant_id))
    FROM accounts AS a LEFT JOIN routing_rules AS rules ON rules.account_id = a.id
    WHERE a.id = p_account_id
  );
END
$fn$`,

  `CREATE FUNCTION call_outcome_intake_2(
    p_call_id text, p_account_id uuid, p_tenant_id text, p_classification text, p_body jsonb, p_body_digest text,
    p_route text, p_route_reason text, p_kind text, p_decided_on jsonb, p_event jsonb,
    p_channel text, p_owner text, p_until timestamptz)
  RETURNS TABLE (same boolean, inserted boolean, facts jsonb, deliveries integer, handed jsonb)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  v_facts jsonb;
  v_until bigint := 0;
  v_matching integer := 0;
BEGIN
  v_facts := call_outcome_facts_2(p_account_id, p_tenant_id);
  IF v_facts IS DISTINCT FROM p_decided_on THEN
    RETURN QUERY SELECT false, false, v_facts, NULL::integer, NULL::jsonb;
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
    RETURN QUERY SELECT true, false, NULL::jsonb, NULL::integer, NULL::jsonb;
    RETURN;
  END IF;
  IF p_event IS NULL OR v_matching = 0 THEN
    RETURN QUERY SELECT true, true, NULL::jsonb, CASE WHEN p_event IS NULL THEN NULL ELSE 0 END, NULL::jsonb;
    RETURN;
  END IF;
  PERFORM event_queue(p_event, v_until, 'pending', p_owner, CASE WHEN p_owner IS NOT NULL THEN p_until END);
  IF p_owner IS NULL THEN
    PERFORM pg_notify(p_channel, p_kind);
    RETURN QUERY SELECT true, true, NULL::jsonb, v_matching, NULL::jsonb;
    RETURN;
  END IF;
  RETURN QUERY SELECT true, true, NULL::jsonb, v_matching,
    jsonb_build_array(jsonb_build_object('id', p_event ->> 'id', 'attempts', 1, 'account_id', p_account_id,
      'traceparent', p_event -> 'traceparent'));
END
$fn$`,

  `CREATE OR REPLACE FUNCTION deliveries_claim_fairly_2(
  p_owner text, p_at timestamptz, p_until timestamptz, p_limit integer, p_max_per_key integer, p_room jsonb
) RETURNS TABLE (
  id uuid, attempts integer, account_id uuid, target_url text, body text, subscription_removed boolean,
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
      WHERE d.id = pick.id AND d.status = 'pending' AND d.next_attempt_at <= p_at
        AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= p_at)
      FOR UPDATE SKIP LOCKED
    ) AS locked
  )
  UPDATE deliveries SET lease_owner = p_owner, lease_expires_at = p_until, attempts = deliveries.attempts + 1
  FROM chosen WHERE deliveries.id = chosen.id
  RETURNING deliveries.id, deliveries.attempts, deliveries.account_id, deliveries.target_url,
    COALESCE(deliveries.payload::text,
      (SELECT (e.payload || jsonb_build_object('id', deliveries.id))::text FROM events AS e WHERE e.id = deliveries.event_id)),
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
    deliveries.traceparent, deliveries.target_origin;
END
$fn$
`
])
