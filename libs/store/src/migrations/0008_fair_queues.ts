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
    (account_id::text || '/' || tenant_id) STORED`
])
