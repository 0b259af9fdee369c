/**
 * The Integrations area (the account's own web page).
 *
 * - `portal_sessions`: one row per single-use link the operator mints; the
 *   link's token and the session token are stored as their SHA-256 only
 *   (the CSRF token is derived from the session token, never stored). A link opens once (`entered_at`), within minutes; the
 *   session then has an idle and an absolute expiry and can be revoked.
 * - Integration keys get an optional label (the page names them).
 * - A hook added in the page was created by no key: `created_by_key_id`
 *   becomes optional and `created_by_session` says which session did it.
 * - The signing secret rotates with an overlap: the previous secret signs
 *   too (a second signature) until `previous_until`.
 * - A test event sent from the page is a delivery marked `test`, which the
 *   perform-list preview does not sample.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `CREATE TABLE portal_sessions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    link_hash bytea NOT NULL UNIQUE CHECK (length(link_hash) = 32),
    link_expires_at timestamptz NOT NULL,
    session_hash bytea UNIQUE CHECK (length(session_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    entered_at timestamptz,
    last_seen_at timestamptz,
    expires_at timestamptz,
    revoked_at timestamptz
  )`,
  `CREATE INDEX portal_sessions_account_idx ON portal_sessions (account_id)`,
  `ALTER TABLE integration_keys ADD COLUMN label text CHECK (length(label) <= 100)`,
  `ALTER TABLE subscriptions ALTER COLUMN created_by_key_id DROP NOT NULL`,
  `ALTER TABLE subscriptions ADD COLUMN created_by_session uuid REFERENCES portal_sessions (id)`,
  `ALTER TABLE signing_secrets ADD COLUMN previous_secret_id uuid REFERENCES vault_secrets (id)`,
  `ALTER TABLE signing_secrets ADD COLUMN previous_until timestamptz`,
  `ALTER TABLE signing_secrets ADD COLUMN rotated_at timestamptz`,
  `ALTER TABLE deliveries ADD COLUMN test boolean NOT NULL DEFAULT false`
])
