/**
 * Secrets at rest and bridge connections: the Vault's data keys (each
 * wrapped under one or more master keys) and sealed secrets, the tenants'
 * bridge connections, and the accounts' webhook signing secrets.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  // Data keys. Exactly one is active (new secrets are sealed under it);
  // retired ones stay until no secret uses them, then rotation deletes them.
  `CREATE TABLE vault_keys (
    id text PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('active', 'retired')),
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz
  )`,
  `CREATE UNIQUE INDEX vault_keys_one_active_idx ON vault_keys (state) WHERE state = 'active'`,

  // A data key encrypted under a master key (identified by a fingerprint,
  // never the key). Several wraps let replicas with the old and the new
  // MASTER_KEY work side by side while the master key changes.
  `CREATE TABLE vault_key_wraps (
    key_id text NOT NULL REFERENCES vault_keys (id) ON DELETE CASCADE,
    master_key_id text NOT NULL,
    wrapped bytea NOT NULL,
    PRIMARY KEY (key_id, master_key_id)
  )`,

  // Every secret at rest: AES-256-GCM under the data key `key_id`, bound to
  // `aad` (its owner: account, tenant, connection, field). The foreign key
  // keeps a data key from being deleted while a secret still needs it.
  `CREATE TABLE vault_secrets (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    key_id text NOT NULL REFERENCES vault_keys (id),
    aad text NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
  )`,
  // Rotation: the secrets not yet under the active key.
  `CREATE INDEX vault_secrets_key_id_idx ON vault_secrets (key_id)`,

  // One bridge connection per client tenant of an account. The id names this
  // configuration (new on every change, bound into the secret's additional
  // data); the version grows on every change (client and token cache identity).
  `CREATE TABLE connections (
    account_id uuid NOT NULL REFERENCES accounts (id),
    tenant_id text NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 200),
    id uuid NOT NULL,
    version integer NOT NULL CHECK (version > 0),
    transport text NOT NULL,
    url text NOT NULL,
    auth_type text NOT NULL CHECK (auth_type IN ('api_key', 'oauth')),
    token_url text,
    client_id text,
    scope text,
    secret_id uuid NOT NULL REFERENCES vault_secrets (id),
    capabilities jsonb NOT NULL,
    checked_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, tenant_id),
    CONSTRAINT connections_id_key UNIQUE (id),
    CONSTRAINT connections_oauth_fields CHECK (
      auth_type = 'api_key' OR (token_url IS NOT NULL AND client_id IS NOT NULL)
    )
  )`,
  `CREATE INDEX connections_secret_id_idx ON connections (secret_id)`,

  // The Standard Webhooks secret of an account, created on first use.
  `CREATE TABLE signing_secrets (
    account_id uuid PRIMARY KEY REFERENCES accounts (id),
    secret_id uuid NOT NULL REFERENCES vault_secrets (id),
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  `CREATE INDEX signing_secrets_secret_id_idx ON signing_secrets (secret_id)`
])
