/**
 * Insertion order as data. `now()` is one value per transaction and, on the
 * embedded database, has millisecond resolution, so rows written together
 * (or within a millisecond) tie on `created_at`; ordering the ties by a random
 * UUID answered them in a random order. A `seq` identity on the tables whose
 * order is part of an answer — subscriptions (oldest first), push receipts
 * (in step order), deliveries (latest first) — makes that order exact.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE subscriptions ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
  `ALTER TABLE crm_push_receipts ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
  `ALTER TABLE deliveries ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
  // Listing and preview: an account's deliveries, latest first, ties in insertion order.
  `DROP INDEX deliveries_account_latest_idx`,
  `CREATE INDEX deliveries_account_latest_idx ON deliveries (account_id, created_at DESC, seq DESC)`
])
