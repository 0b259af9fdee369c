/**
 * The receiver lifecycle (issue 16): what a receiver's answer does to its
 * subscription, recovery, and retention.
 *
 * - A delivery may end without being delivered and without failing:
 *   status `ended`, with `end_reason` `gone` (the receiver answered 410 and
 *   its subscription was removed), `aborted` (it answered
 *   `webhook-delivery: abort-message`) or `disabled` (its subscription was
 *   disabled). An attempt may be logged as `ended` likewise.
 * - A subscription keeps why it was removed (`removed_reason`), whether and
 *   why it is disabled, and its failure clock: failures of distinct
 *   deliveries counted in a one-day window, and `failing_since` once enough
 *   of them failed in that window (reset by the next success).
 * - Payloads may be dropped before their rows (privacy): `payload` becomes
 *   NULL and `payload_dropped_at` says when.
 * - Recoveries (replay every failed or ended delivery of a subscription
 *   since a time) are a job queue with their progress in the row.
 * - Retention deletes finished rows oldest first, in small batches: partial
 *   indexes over finished rows keep each batch an index range scan.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check`,
  `ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed', 'ended'))`,
  `ALTER TABLE deliveries ADD COLUMN end_reason text CHECK (end_reason IN ('gone', 'aborted', 'disabled'))`,
  `ALTER TABLE deliveries ALTER COLUMN payload DROP NOT NULL`,
  `ALTER TABLE deliveries ADD COLUMN payload_dropped_at timestamptz`,
  `CREATE INDEX deliveries_finished_idx ON deliveries (created_at) WHERE status <> 'pending'`,
  `CREATE INDEX deliveries_payload_kept_idx ON deliveries (created_at) WHERE status <> 'pending' AND payload IS NOT NULL`,
  // Recovery: a subscription's failed and ended deliveries in insertion order.
  `CREATE INDEX deliveries_subscription_finished_idx ON deliveries (subscription_id, seq) WHERE status IN ('failed', 'ended')`,

  `ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_result_check`,
  `ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_result_check CHECK (result IN ('delivered', 'retry', 'failed', 'ended'))`,

  `ALTER TABLE subscriptions ADD COLUMN removed_reason text CHECK (removed_reason IN ('unsubscribed', 'gone'))`,
  `ALTER TABLE subscriptions ADD COLUMN disabled_at timestamptz`,
  `ALTER TABLE subscriptions ADD COLUMN disabled_reason text CHECK (length(disabled_reason) <= 500)`,
  `ALTER TABLE subscriptions ADD COLUMN failing_since timestamptz`,
  `ALTER TABLE subscriptions ADD COLUMN failure_window_start timestamptz`,
  `ALTER TABLE subscriptions ADD COLUMN failure_window_count integer NOT NULL DEFAULT 0`,
  // Fan-out reads active, enabled subscriptions only.
  `DROP INDEX subscriptions_active_idx`,
  `CREATE INDEX subscriptions_active_idx ON subscriptions (account_id, event) WHERE removed_at IS NULL AND disabled_at IS NULL`,

  `CREATE INDEX crm_push_jobs_finished_idx ON crm_push_jobs (updated_at) WHERE status <> 'pending'`,

  `CREATE TABLE subscription_recoveries (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    subscription_id uuid NOT NULL REFERENCES subscriptions (id),
    since timestamptz NOT NULL,
    until timestamptz NOT NULL CHECK (since <= until),
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_expires_at timestamptz,
    last_error text,
    total integer NOT NULL DEFAULT 0 CHECK (total >= 0),
    queued integer NOT NULL DEFAULT 0 CHECK (queued >= 0),
    skipped integer NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    after_seq bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
  )`,
  `CREATE INDEX subscription_recoveries_due_idx ON subscription_recoveries (next_attempt_at) WHERE status = 'pending'`,
  `CREATE INDEX subscription_recoveries_subscription_idx ON subscription_recoveries (subscription_id, created_at DESC)`
])
