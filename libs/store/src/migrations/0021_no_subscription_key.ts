/**
 * The last foreign key on the delivery's hot path goes (issue 35, part 3):
 * `deliveries.subscription_id` → `subscriptions.id`. Its check locks the
 * subscription's row (`FOR KEY SHARE`) on every delivery insert, and that
 * lock is written to the WAL: a `Heap/LOCK subscriptions` record per
 * delivery, and a multixact (`MultiXact/CREATE_ID`) when two outcomes of
 * one account hold it at once. 0018 dropped the account keys for the same
 * reason and kept this one only as the fan-out crash test's place to hold
 * a batch; that test now holds it with a trigger of its own.
 *
 * No reference can dangle:
 * - A subscription row is never deleted. Removal is soft (`removed_at`:
 *   `DELETE /subscribe/{id}`, the operator, a receiver's 410, a removed
 *   destination) and retention prunes deliveries, attempts and events,
 *   never subscriptions.
 * - Every delivery names a subscription its writer read from the table: the
 *   fan-out (`event_fan_out_2`, `call_outcome_intake_3`) in the same
 *   statement, the test event just before (`Subscriptions.find`), the
 *   intake functions of earlier releases from the caller's own read. Since
 *   no row goes, an id read once stays valid.
 * - A backup is one consistent snapshot of both tables and a restore loads
 *   them in one transaction checked against the manifest, so the restore no
 *   longer needing subscriptions before deliveries changes nothing.
 * The pending-deliveries index on `subscription_id` stays: ending a removed
 * subscription's pending deliveries reads it.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_subscription_id_fkey`
])
