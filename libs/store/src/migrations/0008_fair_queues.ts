/**
 * Fair queues: the key a job occupies while it runs, so a worker can bound
 * the slots one target holds (JobQueue `Fairness`). Generated from columns
 * every writer already sets, so no insert changes and replays keep it.
 * - deliveries: the receiver's origin (scheme, host and port of the target
 *   URL, lower-cased; "" when the URL does not parse);
 * - crm_push_jobs: the account's bridge (account and tenant).
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries ADD COLUMN target_origin text NOT NULL GENERATED ALWAYS AS
    (lower(COALESCE(substring(target_url FROM '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*'), ''))) STORED`,
  `ALTER TABLE crm_push_jobs ADD COLUMN bridge_key text NOT NULL GENERATED ALWAYS AS
    (account_id::text || '/' || tenant_id) STORED`,
  // Fair claims walk the keys with pending work and take each key's oldest due rows: flat however
  // long one key's backlog (and however many finished rows).
  `CREATE INDEX deliveries_fair_due_idx ON deliveries (target_origin, next_attempt_at) WHERE status = 'pending'`,
  `CREATE INDEX crm_push_jobs_fair_due_idx ON crm_push_jobs (bridge_key, next_attempt_at) WHERE status = 'pending'`
])
