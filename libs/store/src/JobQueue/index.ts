/**
 * A durable job queue over an ordinary table: the CRM push jobs and the
 * webhook deliveries are rows that workers claim, run and finish.
 *
 * This file is the module's public face; each idea has a file of its own:
 * - Table.ts: declaring a queue table (`table`, the columns it needs) and
 *   the vocabulary of its jobs (`Job`, `JobResult`, `FinishExtras`);
 * - Statements.ts: the claim, heartbeat and finish statements one lease
 *   owner uses (`make`), built once;
 * - Runner.ts: the runner (`run`) and its options; Metrics.ts what it reports;
 * - Controls.ts: the operator's side (`depth`, `replay`, `wake`, `controls`);
 * - internal/: what the runner and statements share and callers never touch.
 *
 * How it works:
 * - A row is due when `status = 'pending'`, `next_attempt_at <= now` and it
 *   holds no live lease. One statement claims up to N due rows
 *   (`FOR UPDATE SKIP LOCKED`, so concurrent claimers never take the same
 *   row), sets the lease and counts the attempt. The lease is held by the
 *   columns, never by an open transaction, so a job may run for as long as
 *   it likes on PGlite (one session) and on a PostgreSQL pool alike.
 * - While a job runs, one heartbeat statement per runner extends the leases
 *   of all its jobs. A runner that dies (SIGKILL, lost host) stops the
 *   heartbeat; its leases expire and another runner claims the rows again:
 *   nothing is lost, and the job runs again (handlers must be idempotent).
 * - On a fair table (`Fairness`: a key column, e.g. the receiver origin,
 *   and a group column, e.g. the account) a runner holds at most
 *   `maxPerKey` jobs of one key (default a quarter of its slots), and a
 *   claim takes the oldest due rows of each key with room (walking the keys
 *   over a `(key, next_attempt_at)` index of the pending rows, so a full
 *   key's backlog costs nothing), the groups taking turns: a silent target
 *   only slows its own jobs. The bound is per runner, held in memory: a
 *   killed runner's slots come back with its leases.
 * - Finishing (complete, retry at a time, dead-letter, end) is guarded by the
 *   lease owner, so a runner that lost its lease can never overwrite the
 *   work of the runner that took the row over. A runner stores the results
 *   that are waiting together, in one statement for all of them (their
 *   extra columns and attempt log rows included); a result with a statement
 *   alongside is one statement of its own, or a transaction when the handler
 *   needs more.
 * - On embedded PGlite the database is this process's alone, so at start a
 *   runner takes back leases of other (dead) processes at once.
 * - Runners wake on LISTEN/NOTIFY (`wake`, sent by whoever inserts jobs), on
 *   the next due time they computed, and on a poll interval as a safety net
 *   (short on PGlite, long on PostgreSQL). Jobs' ends wake the claimer too,
 *   gathered: once a few slots were freed since the last claim began, and at
 *   the latest a short window (`CLAIM_WINDOW`) after the first of them, so a
 *   busy key's backlog is claimed a few rows at a time, never left to the poll.
 *   A job holds its slot (and its key's share) while its handler runs: once
 *   the handler decided, the slot is free while the result is being stored.
 * - Interrupting a runner (clean shutdown) stops claiming, lets running jobs
 *   finish for a grace period, interrupts the rest and releases their leases
 *   in one statement (the attempt is given back), so another replica takes
 *   them at once.
 *
 * Time comes from Effect's `Clock` (so tests drive leases and retries with
 * the `TestClock`); replicas sharing a database need synchronized clocks
 * (NTP), well within the lease duration.
 */
export * from "./Controls.js"
export * from "./Metrics.js"
export * from "./Runner.js"
export * from "./Statements.js"
export * from "./Table.js"
