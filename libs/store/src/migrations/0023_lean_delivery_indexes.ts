/**
 * Fewer index entries per delivery (issue 35, leaner writes): each entry of
 * a B-tree is a WAL record when its row is written.
 *
 * - `deliveries_finished_idx` (0009) took an entry for every delivery that
 *   finished, for retention alone. Retention now finds a batch of old
 *   finished deliveries through `deliveries_account_latest_idx`
 *   (`account_id, created_at`), which every delivery has anyway, one account
 *   after another. A replica of the previous release pruning during a
 *   rolling upgrade still prunes, with a slower plan for that while.
 *   (A BRIN index on `created_at` instead was measured and left out: a
 *   batch in `created_at` order reads and sorts every old row's block range
 *   each time, the oldest-row gauge reads the whole table, and once pruned
 *   space is reused the ranges never narrow again, so an empty batch reads
 *   the reused part of the table every round.)
 * - `deliveries_due_idx` (0001, `next_attempt_at` of pending rows) took an
 *   entry for every delivery queued. The fair claim never read it; the
 *   queue's wake-time of a fair table now reads the first unleased row of
 *   each receiver origin through `deliveries_fair_due_idx` (`target_origin,
 *   next_attempt_at`). What reads every pending row (the wake-time's lease
 *   term, the queue gauges) reads it through another partial index of
 *   pending rows, as it read this one; so does a replica of the previous
 *   release for its whole wake-time, during a rolling upgrade. A claim in
 *   due order without shares (the worker always passes them) sorts the due
 *   rows.
 * - `deliveries_subscription_pending_idx` (0011, `subscription_id` of
 *   pending rows) took an entry for every delivery queued, for the one
 *   statement that ends a subscription's pending deliveries when its
 *   receiver answers 410 Gone or it is disabled: rare, and bounded without
 *   it, as it now also names the account and the origin of the
 *   subscription (`SubscriptionLifecycle.endPending`), so either the
 *   account's deliveries (`deliveries_account_latest_idx`) or the origin's
 *   pending ones (`deliveries_fair_due_idx`) are read. What read every
 *   pending row through it reads the fair index.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `DROP INDEX deliveries_finished_idx`,
  `DROP INDEX deliveries_due_idx`,
  `DROP INDEX deliveries_subscription_pending_idx`
])
