/**
 * The event of an outcome announced at its intake is the outcome itself
 * (issue 35, part 3: payloads stored once). Since migration 0019 the intake
 * of an outcome with at most `p_inline` subscriptions wrote the outcome (its
 * body), an `events` row (the payload built from that body, again) and the
 * deliveries. Measured with `bench:db-cost --detail`, one subscription: the
 * `events` row and its two index entries were 0.83 KiB of the 3.6 KiB an
 * outcome cost, and the `(event_id, subscription_id)` entries of its
 * delivery (written twice: a finished delivery's `status` change is never a
 * HOT update) 0.2 KiB more.
 *
 * An event announced at intake (no CRM push) is a pure function of the
 * stored outcome, its call id and the time it was made, so it need not be
 * stored at all:
 * - `deliveries.outcome_event`: true for a delivery of the event its call's
 *   outcome announced at intake. It has no payload and no `event_id`; the
 *   body sent is rendered from `call_outcomes.body` (of `call_id`) and the
 *   delivery's `created_at` and `id` (`@crm-relay/events` Announcement
 *   `renderBody`), the same bytes on every attempt. Outcomes are never
 *   deleted (retention keeps them), so such a delivery can always be sent
 *   again (a replay, a recovery).
 * - `call_outcome_intake_4`: 0019's `call_outcome_intake_3` whose inline
 *   path writes no `events` row and inserts the deliveries so (plain
 *   inserts: the outcome is new in this statement, so no pair can exist yet,
 *   and `deliveries_event_subscription_idx` does not index them). The handed
 *   deliveries come back without their body: the caller built the event and
 *   renders it. Above `p_inline` it is 0019's path, unchanged (an `events`
 *   row with the payload once, fanned out in batches).
 *   The outcome is inserted without `ON CONFLICT`: a speculative insertion
 *   logs a confirmation record for every row (48 B), for a conflict that
 *   only a repeated call id has. A repeat is found first (the primary key);
 *   two identical ones at once leave one to fail on the key, caught in a
 *   block of its own and answered as the repeat it is.
 * - `deliveries_claim_fairly_3`: 0017's claim that also returns `outcome`,
 *   what rendering needs (call id, created_at and the outcome body as JSON)
 *   for such a delivery, NULL for any other (whose `body` is as before).
 * The previous functions stay for replicas of the previous release during a
 * rolling upgrade: their intake keeps writing `events` rows, which this
 * release sends as before; their claim (`deliveries_claim_fairly_2`,
 * replaced in place) no longer takes these deliveries, whose body it could
 * not give its worker, and leaves them to this release's replicas.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries ADD COLUMN outcome_event boolean NOT NULL DEFAULT false`,
  `ALTER TABLE call_outcomes ADD COLUMN traceparent text`,
  `ALTER TABLE call_outcomes ALTER COLUMN body_digest DROP NOT NULL`,

  `CREATE FUNCTION call_outcome_intake_4(
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
      'destination_id', b.destination_id, 'traceparent', p_event -> 'traceparent', 'job_fair_key', q.target_origin)) END,
    array_agg(q.target_origin)
  INTO v_handed, v_origins
  FROM queued AS q JOIN batch AS b ON b.id = q.subscription_id;
  IF NOT v_leased AND v_origins IS NOT NULL THEN
    PERFORM pg_notify(p_channel, p_kind);
  END IF;
  RETURN QUERY SELECT true, true, NULL::jsonb, v_matching, NULL::jsonb, v_handed, v_origins;
END
$fn$`,

  `CREATE FUNCTION deliveries_claim_fairly_3(
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

  // 0012's preview, replaced in place (the same signature, for every release): an outcome's own event keeps no
  // `source` of its own (the event's is the outcome's).
  `CREATE OR REPLACE FUNCTION preview_latest(p_account_id uuid, p_limit integer)
  RETURNS json
  LANGUAGE plpgsql STABLE AS $body$
  BEGIN
    RETURN (
      SELECT coalesce(json_agg(json_build_object(
          'id', l.id, 'call_id', l.call_id,
          'source', CASE WHEN l.outcome_event
            THEN (SELECT o.body ->> 'source' FROM call_outcomes AS o WHERE o.call_id = l.call_id) ELSE l.source END,
          'contact_external_id', l.contact_external_id, 'appointment_external_id', l.appointment_external_id
        ) ORDER BY l.created_at DESC, l.call_id, l.event, l.seq DESC), '[]'::json)
      FROM (
        SELECT DISTINCT ON (d.created_at, d.call_id, d.event)
          d.id, d.call_id, d.source, d.contact_external_id, d.appointment_external_id, d.created_at, d.event, d.seq,
          d.outcome_event
        FROM deliveries AS d
        WHERE d.account_id = p_account_id AND NOT d.test
        ORDER BY d.created_at DESC, d.call_id, d.event, d.seq DESC
        LIMIT p_limit
      ) AS l
    );
  END
  $body$`,

  // The previous release's claim, replaced in place: it cannot render an outcome's event, so it leaves those
  // deliveries to this release's claim (above) rather than claim rows its worker cannot read.
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
        AND NOT d.outcome_event
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
