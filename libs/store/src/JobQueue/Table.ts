/**
 * Declaring a queue table: what the queue needs to know of it, and the
 * vocabulary of its jobs (a claimed `Job`, a handler's `JobResult`).
 *
 * Columns a queue table needs (other columns are the table's own):
 *
 * | column            | type                          | meaning                                              |
 * |-------------------|-------------------------------|------------------------------------------------------|
 * | id                | uuid (or text) PRIMARY KEY    | the job                                              |
 * | status            | text NOT NULL                 | `pending`, the completed status, `failed` (`ended`)  |
 * | attempts          | integer NOT NULL DEFAULT 0    | claims of the current run (reset by `replay`)        |
 * | next_attempt_at   | timestamptz NOT NULL          | not claimed before this time                         |
 * | lease_owner       | text                          | the runner holding the lease, NULL when none         |
 * | lease_expires_at  | timestamptz                   | the lease ends here; after it the row is claimable   |
 * | last_error        | text                          | the latest failure, one short sentence               |
 *
 * and, for the claim, an index such as
 * `CREATE INDEX <table>_due_idx ON <table> (next_attempt_at) WHERE status = 'pending'`;
 * a fair table (`Fairness`) needs `(<key>, next_attempt_at) WHERE status = 'pending'`
 * instead, which also serves its wake-time (see `Statements.nextDue`).
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Data, type Duration, type Effect, type Either, type ParseResult, Schema } from "effect"

/**
 * The statements that make a scratch queue table `name` with the columns above, `own` columns of its
 * own (e.g. `"label text NOT NULL"`), and the due-time index: what tests and benchmarks queue on.
 * (Migrations restate their tables in full.)
 */
export const scratchTableSql = (name: string, own: ReadonlyArray<string>): ReadonlyArray<string> => [
  `CREATE TABLE ${name} (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    ${own.map((column) => `${column},`).join("\n    ")}
    status text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_expires_at timestamptz,
    last_error text
  )`,
  `CREATE INDEX ${name}_due_idx ON ${name} (next_attempt_at) WHERE status = 'pending'`
]

/** A queue table: its name, its completed status, and what a claim returns besides id and attempts. */
export interface JobTable<A> {
  readonly table: string
  /** The status of a finished job, e.g. `done` or `delivered`. */
  readonly completedStatus: string
  /** The notification channel that wakes this table's runners. */
  readonly channel: string
  /** The select list of a claim (columns of the table), after `id` and `attempts`. */
  readonly select: string
  /** Decodes the selected columns of one claimed row (synchronously: a claim decodes every row it takes). */
  readonly decode: (row: unknown) => Either.Either<A, ParseResult.ParseError>
  /** The table has a `traceparent` column: a job runs in the trace that queued it. */
  readonly traced: boolean
  /** The SQL expression of a claimed row's trace context (traced tables): `traceparent` unless `table` says otherwise. */
  readonly traceparent: string
  /** Fair claims (see `Fairness`), when the table has the columns. */
  readonly fairness: Fairness | undefined
  /** The table a finished attempt's `log` row goes to (in the finishing statement), if any. */
  readonly log: string | undefined
  /** A function that makes this table's fair claim (see `table`), if any. */
  readonly claimFunction: string | undefined
  /** A function that stores many results (see `table`), if any. */
  readonly finishFunction: FinishFunction | undefined
  /** The row's columns holding its final attempt (see `FinalAttempt`), if any. */
  readonly finalAttempt: FinalAttempt | undefined
}

/**
 * Columns of the row that hold its last finished attempt in place of a
 * `log` row, written by the table's `finishFunction`: a job done in one
 * attempt then logs no row of its own. `replay` moves the attempt into the
 * `log` table, in the statement that queues the row again, before the next
 * run can overwrite it. Developer-written SQL, never input.
 */
export interface FinalAttempt {
  /** The column that is not NULL when the row holds an attempt. */
  readonly present: string
  /** The `log` row of the held attempt: log column → SQL expression over the job's row. */
  readonly log: Readonly<Record<string, string>>
  /** The row's columns that hold it, emptied by the move. */
  readonly columns: ReadonlyArray<string>
}

/**
 * A function (created by a migration) that stores many results as
 * `finishMany`'s statement does, planned once per session. Called as
 * `fn(owner, jobs jsonb, log jsonb)`: `jobs` the rows' new state (`id`,
 * `status`, `last_error`, `next_attempt_at` of a retry, and the `set`
 * columns each result gives; a column absent from an element keeps its
 * value), applied only to pending rows under `owner`'s lease; `log` the
 * `log` table's rows, inserted whatever the lease. It returns the ids whose
 * lease `owner` still held.
 */
export interface FinishFunction {
  readonly name: string
  /** The `set` columns it writes; a batch that sets any other is stored by the statement. */
  readonly columns: ReadonlyArray<string>
}

/**
 * Columns that make claims fair: `key` names the target a job occupies while
 * it runs (a receiver origin, a tenant's bridge) and `group` whose work it is
 * (an account). A runner holds at most `maxPerKey` jobs of one key at once,
 * and takes due work round-robin across groups (the first due job of every
 * group before the second of any), so a silent target only slows its own
 * jobs. Both are developer-written column names, never input.
 */
export interface Fairness {
  readonly key: string
  readonly group: string
  /**
   * A key's work may be held whatever its rows' due times (a receiver origin held while it fails):
   * an SQL expression over the key `k.key` giving the time before which its rows are not claimed
   * (NULL when not held). The wake-time (`nextDue`) reads it; the claim function applies the hold.
   */
  readonly heldUntil?: string | undefined
}

/** Declares a queue table; `row` names (and decodes) the columns a claim returns with each job. */
export const table = <A, I>(options: {
  readonly table: string
  /** Default `done`. */
  readonly completedStatus?: string
  /** A `Schema.Struct` of the returned columns (without `id` and `attempts`). */
  readonly row: Schema.Schema<A, I, never> & { readonly fields: Schema.Struct.Fields }
  /** The notification channel of `wake`; default `jobs:<table>`. */
  readonly channel?: string
  /**
   * The select list, when it is more than the field names (e.g.
   * `"account_id, payload::text AS body"`); developer-written SQL, never input.
   */
  readonly select?: string
  /** The table has a `traceparent` column (TraceContext) the runner continues. Default false. */
  readonly traced?: boolean
  /**
   * The trace context of a claimed row, when it is not only its `traceparent` column (e.g. kept on a row it
   * refers to); developer-written SQL, never input. Default `traceparent`.
   */
  readonly traceparent?: string
  /** Fair claims over these columns (see `Fairness`). Default none: due order only. */
  readonly fairness?: Fairness
  /** The attempt log table of `FinishExtras.log` rows. */
  readonly log?: string
  /**
   * A function (created by a migration) that makes the fair claim instead of
   * the statement built here: PostgreSQL plans a function's statements once
   * per session, where a statement sent as text is planned on every call.
   * Called as `fn(owner, at, until, limit, max_per_key, room jsonb)`, it
   * does what the built statement does and returns the same columns: `id`,
   * `attempts`, the select list, `traceparent` (traced tables) and
   * `job_fair_key`. It leaves `synchronous_commit` to the caller.
   */
  readonly claimFunction?: string
  /** A function that stores many results instead of `finishMany`'s statement (see `FinishFunction`). */
  readonly finishFunction?: FinishFunction
  /** The row's columns holding its final attempt, kept in `log` by `replay` (see `FinalAttempt`). */
  readonly finalAttempt?: FinalAttempt
}): JobTable<A> => {
  const names = Object.keys(options.row.fields)
  return {
    table: options.table,
    completedStatus: options.completedStatus ?? "done",
    channel: options.channel ?? `jobs:${options.table}`,
    select: options.select ?? names.map((name) => `"${name.replaceAll("\"", "\"\"")}"`).join(", "),
    decode: Schema.decodeUnknownEither(options.row),
    traced: options.traced ?? false,
    traceparent: options.traceparent ?? "traceparent",
    fairness: options.fairness,
    log: options.log,
    claimFunction: options.claimFunction,
    finishFunction: options.finishFunction,
    finalAttempt: options.finalAttempt
  }
}

/** A claimed job. */
export interface Job<A> {
  readonly id: string
  /** Which attempt of the current run this is (1 for the first). */
  readonly attempt: number
  readonly data: A
  /** The stored trace context of a traced table's row, if any. */
  readonly traceparent?: string | undefined
  /** The fairness key of a fair table's row (see `Fairness`). */
  readonly key?: string | undefined
}

/** What else to write with a job's state change, in the same SQL statement. */
export interface FinishExtras {
  /** More columns of the job's row (e.g. `delivered_at`). */
  readonly set?: Readonly<Record<string, unknown>> | undefined
  /**
   * One more data-modifying statement (INSERT, UPDATE or DELETE, without a
   * WITH of its own), run as a CTE of the state change's statement: atomic
   * with it, and no transaction round trips. It runs even when the lease was
   * lost (e.g. an attempt log that should record what happened anyway).
   */
  readonly alongside?: Statement.Fragment | undefined
  /**
   * One row of the table's `log` table (column → value, JSON-serialisable;
   * dates as `Date`), inserted in the finishing statement, even when the
   * lease was lost. Unlike `alongside` it lets the runner finish many jobs
   * and log their attempts in a single statement.
   */
  readonly log?: Readonly<Record<string, unknown>> | undefined
}

/**
 * What a handler decided. `set` and `alongside` (see FinishExtras) go into
 * the state change's single statement; `record`, for work that needs more
 * than one statement, runs before it in one transaction.
 */
export type JobResult = Data.TaggedEnum<{
  /**
   * Done: status becomes the table's completed status. `stored`: the handler's own statement already
   * did so under the job's lease (e.g. with its last write), so the runner writes nothing: one commit less.
   */
  Complete: FinishExtras & { readonly record?: Effect.Effect<void, SqlError> | undefined; readonly stored?: boolean | undefined }
  /** Failed for now: pending again, due after `delay`. */
  Retry: FinishExtras & {
    readonly delay: Duration.DurationInput
    readonly error: string
    readonly record?: Effect.Effect<void, SqlError> | undefined
  }
  /** Failed for good: status `failed` (replayable). */
  DeadLetter: FinishExtras & { readonly error: string; readonly record?: Effect.Effect<void, SqlError> | undefined }
  /**
   * Ended for a reason that is no failure of the job (e.g. the receiver said
   * the subscription is gone, or asked to stop this message): status
   * `status` (a final status the table allows, neither `pending` nor its
   * completed status), `reason` kept in `last_error`. Not retried.
   */
  End: FinishExtras & {
    readonly status: string
    readonly reason: string
    readonly record?: Effect.Effect<void, SqlError> | undefined
  }
}>

/** Constructors of `JobResult`. */
export const JobResult = Data.taggedEnum<JobResult>()
