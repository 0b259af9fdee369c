/**
 * Leaner writes per outcome (issue 35, part 3): no row locks for foreign
 * keys on the hot path, one index entry fewer per delivery.
 *
 * A foreign key is checked by locking the referenced row (`FOR KEY SHARE`),
 * and that lock is itself written to the WAL: a `Heap/LOCK` record on the
 * account's row for every outcome and every delivery, and, when two
 * transactions hold it at once (outcomes of one account arriving together,
 * as they do), a multixact to record both holders. Measured with
 * `bench:db-cost --detail` at one subscription: 0.3 KiB of the 4.6 KiB an
 * outcome cost was these locks (`Heap/LOCK accounts`, `MultiXact/CREATE_ID`,
 * `Heap/LOCK subscriptions`).
 *
 * - `call_outcomes.account_id`: the intake's statement reads the account
 *   (`call_outcome_facts_2`) and writes nothing when there is none.
 * - `deliveries.account_id`, `deliveries.subscription_id`: a delivery is
 *   written for a subscription the same statement read (the fan-out, a test
 *   event), of that subscription's account.
 * Accounts and subscriptions are never deleted (a subscription is removed by
 * `removed_at`), so no reference can dangle: the keys only cost. `events`
 * was made without them for the same reason (migration 0017).
 *
 * The operator's search (`Deliveries.search`: deliveries in some statuses
 * across accounts, latest first) had an index on `(status, seq)`: two
 * entries per delivery (queued, then finished: a change of `status` is
 * never a HOT update), 0.15 KiB an outcome, for a listing whose default and
 * usual question is the failed and ended ones. It now indexes those only, so
 * a delivered delivery adds no entry; a search of pending ones reads the
 * pending indexes, one of delivered ones across every account reads the
 * table (retention bounds it), an account's reads its own index.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE call_outcomes DROP CONSTRAINT call_outcomes_account_id_fkey`,
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_account_id_fkey`,
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_subscription_id_fkey`,
  `CREATE INDEX deliveries_unsent_seq_idx ON deliveries (seq DESC) WHERE status IN ('failed', 'ended')`,
  `DROP INDEX deliveries_status_seq_idx`
])
