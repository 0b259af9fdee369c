/**
 * The Event API's tables: accounts, integration keys, subscriptions,
 * rate-limit counters, and the deliveries the preview reads (the delivery
 * worker of the call pipeline fills and extends them).
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE accounts (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    mode text NOT NULL CHECK (mode IN ('live', 'demo', 'sandbox')),
    created_at timestamptz NOT NULL DEFAULT now()
  )`,

  // The secret is never stored: only its SHA-256 (see IntegrationKeys).
  `CREATE TABLE integration_keys (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz,
    CONSTRAINT integration_keys_secret_hash_key UNIQUE (secret_hash)
  )`,
  `CREATE INDEX integration_keys_account_id_idx ON integration_keys (account_id)`,

  // Removal is a timestamp, so a removed id stays removed (404) and past
  // deliveries keep their subscription.
  `CREATE TABLE subscriptions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    target_url text NOT NULL,
    event text NOT NULL,
    created_by_key_id uuid NOT NULL REFERENCES integration_keys (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    removed_at timestamptz
  )`,
  // Fan-out: the active subscriptions of an account for an event value.
  `CREATE INDEX subscriptions_active_idx ON subscriptions (account_id, event) WHERE removed_at IS NULL`,

  // Fixed one-minute windows, one row per subject (e.g. an integration key),
  // bumped by a single upsert per request.
  `CREATE TABLE rate_limits (
    subject text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    count integer NOT NULL CHECK (count > 0)
  )`,

  // One row per (event, subscription): the webhook delivery job. Workers
  // claim due rows with FOR UPDATE SKIP LOCKED and hold a lease; an expired
  // lease makes the row claimable again.
  `CREATE TABLE deliveries (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    subscription_id uuid REFERENCES subscriptions (id),
    event text NOT NULL CHECK (event IN ('lead', 'booking')),
    call_id text NOT NULL,
    source text NOT NULL DEFAULT '',
    contact_external_id text NOT NULL DEFAULT '',
    appointment_external_id text,
    target_url text NOT NULL DEFAULT '',
    payload jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_expires_at timestamptz,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
  )`,
  // Preview: an account's latest deliveries.
  `CREATE INDEX deliveries_account_latest_idx ON deliveries (account_id, created_at DESC, id DESC)`,
  // Workers: due pending rows.
  `CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending'`,
  `CREATE INDEX deliveries_subscription_id_idx ON deliveries (subscription_id)`
])
