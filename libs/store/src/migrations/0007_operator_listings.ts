/**
 * What the operator's listings need. Accounts and integration keys get the
 * `seq` insertion order the other listed tables have (0005), so their pages
 * are stable and in creation order. A key keeps its last four characters
 * (enough to recognise it, useless to an attacker: the rest is 256 random
 * bits) and when it was last used, written at most once a minute per key.
 * A replayed push job keeps the attempts of its earlier runs.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE accounts ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
  `CREATE UNIQUE INDEX accounts_seq_idx ON accounts (seq)`,
  `ALTER TABLE integration_keys ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
  `ALTER TABLE integration_keys ADD COLUMN last_four text CHECK (length(last_four) = 4)`,
  `ALTER TABLE integration_keys ADD COLUMN last_used_at timestamptz`,
  `ALTER TABLE crm_push_jobs ADD COLUMN previous_attempts integer NOT NULL DEFAULT 0`,
  // Listing failed or pending deliveries across accounts, latest first.
  `CREATE INDEX deliveries_status_seq_idx ON deliveries (status, seq DESC)`
])
