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
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `DROP INDEX deliveries_finished_idx`
])
