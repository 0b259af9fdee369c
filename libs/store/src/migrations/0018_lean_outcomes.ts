/**
 * Leaner writes per outcome (issue 35, part 3): no row locks for foreign
 * keys on the hot path, one index entry fewer per delivery, one commit
 * fewer per event.
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
 * - `deliveries.account_id`: a delivery is written for a subscription the
 *   same statement read (the fan-out, a test event), of that account.
 * Accounts are never deleted, so no reference can dangle: the keys only
 * cost. `events` was made without them for the same reason (migration 0017).
 * The key to the subscription stays for now (0.05 KiB): its check is where
 * the fan-out's crash test holds a batch (a subscription's row locked FOR
 * UPDATE) to kill the worker between two batches; that test needs another
 * place to hold it before this key can go.
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
  `CREATE INDEX deliveries_unsent_seq_idx ON deliveries (seq DESC) WHERE status IN ('failed', 'ended')`,
  `DROP INDEX deliveries_status_seq_idx`,
  // Migration 0017's `event_fan_out` that, holding the event's lease, also finishes the event with its last
  // batch (the one not full): the runner then stores nothing (`JobResult.Complete({ stored: true })`), one
  // commit less per event. `finished` says so. The 0017 function stays for replicas of the previous release.
  `CREATE FUNCTION event_fan_out_2(p_event uuid, p_owner text, p_limit integer, p_channel text)
  RETURNS TABLE (ids uuid[], more boolean, held boolean, finished boolean)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  e events%ROWTYPE;
  v_ids uuid[];
  v_count integer;
  v_last bigint;
  v_more boolean;
BEGIN
  SELECT * INTO e FROM events AS v
  WHERE v.id = p_event AND (p_owner IS NULL OR (v.lease_owner = p_owner AND v.status = 'pending'));
  IF NOT FOUND THEN
    RETURN QUERY SELECT ARRAY[]::uuid[], false, false, false;
    RETURN;
  END IF;
  WITH batch AS (
    SELECT s.id, s.target_url, s.seq FROM subscriptions AS s
    WHERE s.account_id = e.account_id AND s.seq > e.fanout_after AND s.seq <= e.fanout_until
      AND s.removed_at IS NULL AND s.disabled_at IS NULL AND s.event IN (e.kind, 'all')
    ORDER BY s.seq LIMIT p_limit
  ), queued AS (
    INSERT INTO deliveries AS d (id, account_id, subscription_id, event_id, event, call_id, source, contact_external_id,
      appointment_external_id, target_url, created_at, next_attempt_at, traceparent)
    SELECT gen_random_uuid(), e.account_id, b.id, e.id, e.kind, e.call_id, e.source, e.contact_external_id,
      e.appointment_external_id, b.target_url, e.created_at, e.created_at, e.traceparent
    FROM batch AS b ORDER BY b.seq
    ON CONFLICT (event_id, subscription_id) WHERE event_id IS NOT NULL DO NOTHING
    RETURNING d.id
  )
  SELECT (SELECT array_agg(q.id) FROM queued AS q), (SELECT count(*) FROM batch), (SELECT max(b.seq) FROM batch AS b)
  INTO v_ids, v_count, v_last;
  v_more := COALESCE(v_count = p_limit, false);
  -- Only a full batch moves the cursor: after the last one the event is finished (redone, it only conflicts).
  IF v_more THEN
    UPDATE events AS v SET fanout_after = v_last WHERE v.id = e.id;
  ELSIF p_owner IS NOT NULL THEN
    UPDATE events AS v SET status = 'done', last_error = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE v.id = e.id;
  END IF;
  IF v_ids IS NOT NULL AND p_channel IS NOT NULL THEN
    PERFORM pg_notify(p_channel, e.kind);
  END IF;
  RETURN QUERY SELECT COALESCE(v_ids, ARRAY[]::uuid[]), v_more, true, NOT v_more AND p_owner IS NOT NULL;
END
$fn$`

])
