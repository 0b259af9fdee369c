/**
 * Event destinations beside REST hooks: an account's RabbitMQ exchange, NATS
 * subject or webhook, managed through the internal API (never the public
 * Event API).
 *
 * - `destinations` holds what only a destination has: its kind, its
 *   configuration (JSON, validated by the kind's Schema at creation) and its
 *   credentials, sealed in the Vault (`credentials_secret_id`) as bridge
 *   credentials are.
 * - Each destination receives events through one `subscriptions` row that
 *   points back to it (`destination_id`): the fan-out, the delivery queue and
 *   its fair share (the row's `target_url` is the destination's address, so
 *   `target_origin` is the broker host), the lifecycle (failing since,
 *   auto-disable, enable, recover), retention and the attempt log are the
 *   ones REST hooks already have.
 * - The delivery worker's claim now also returns the subscription's
 *   `destination_id` (a new version of migration 0011's function, which is
 *   kept: a replica still running the previous release calls it), and so do
 *   the deliveries the outcome intake hands to its runner (migration 0015's
 *   function replaced in place: a previous release's runner ignores the
 *   extra field).
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE destinations (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    kind text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]{0,31}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    config jsonb NOT NULL,
    credentials_secret_id uuid REFERENCES vault_secrets (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    removed_at timestamptz
  )`,
  `CREATE INDEX destinations_account_idx ON destinations (account_id, created_at)`,
  `ALTER TABLE subscriptions ADD COLUMN destination_id uuid REFERENCES destinations (id)`,
  `CREATE UNIQUE INDEX subscriptions_destination_idx ON subscriptions (destination_id) WHERE destination_id IS NOT NULL`,
  `CREATE FUNCTION deliveries_claim_fairly_2(
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
    (SELECT s.destination_id FROM subscriptions AS s WHERE s.id = deliveries.subscription_id),
    deliveries.traceparent, deliveries.target_origin;
END
$fn$
`,
  `CREATE OR REPLACE FUNCTION call_outcome_intake(
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
        'destination_id', (SELECT s.destination_id FROM subscriptions AS s WHERE s.id = q.subscription_id),
        'traceparent', q.traceparent, 'job_fair_key', q.target_origin))
      FROM queued AS q) END
  FROM guard;
END
$fn$`
])
