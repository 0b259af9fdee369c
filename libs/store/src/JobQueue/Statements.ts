/**
 * The statements of one queue table for one lease owner: claim, heartbeat,
 * finish (one job or many), release and the next due time. `make` builds
 * them once (a runner, or a service at Layer build); every call after that
 * only binds values. `releaseOtherProcesses` takes back a dead process's
 * leases on a database this process owns alone.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Clock, Duration, Effect, Either, Option, type ParseResult } from "effect"
import { randomBytes } from "node:crypto"
import * as Os from "node:os"
import { jobOf } from "./internal/jobOf.js"
import { type FinishExtras, type Job, JobResult, type JobTable } from "./Table.js"

/** What a fair claim must respect (see `Fairness`). */
export interface ClaimShares {
  /** Most jobs of one key this runner may hold. */
  readonly maxPerKey: number
  /** Jobs of each key this runner holds now. */
  readonly running: ReadonlyMap<string, number>
}

/** One job's result for `finishMany`. */
export interface Finished {
  readonly id: string
  readonly result: JobResult
}

/** Statements over one queue table for one lease owner. */
export interface JobQueue<A> {
  readonly table: JobTable<A>
  /** This runner's lease owner id. */
  readonly owner: string
  /**
   * Claims up to `limit` due rows with a lease of `lease`, counting an
   * attempt on each; on a fair table, within `shares` (no more than
   * `maxPerKey` running per key, round-robin across groups).
   */
  readonly claim: (limit: number, lease: Duration.Duration, shares?: ClaimShares) => Effect.Effect<ReadonlyArray<Job<A>>>
  /** Extends the leases of `ids` that this owner still holds; returns those ids. */
  readonly heartbeat: (ids: ReadonlyArray<string>, lease: Duration.Duration) => Effect.Effect<ReadonlyArray<string>>
  /** Marks the job completed; false when this owner no longer holds it. */
  readonly complete: (id: string, extras?: FinishExtras) => Effect.Effect<boolean>
  /** Makes the job pending again, due after `delay`; false when this owner no longer holds it. */
  readonly retry: (id: string, delay: Duration.DurationInput, error: string, extras?: FinishExtras) => Effect.Effect<boolean>
  /** Marks the job failed for good; false when this owner no longer holds it. */
  readonly deadLetter: (id: string, error: string, extras?: FinishExtras) => Effect.Effect<boolean>
  /** Ends the job with `status` for `reason` (see `JobResult.End`); false when this owner no longer holds it. */
  readonly end: (id: string, status: string, reason: string, extras?: FinishExtras) => Effect.Effect<boolean>
  /**
   * Stores the results of many jobs in one statement (state changes guarded
   * by the lease, `set` columns and `log` rows; no `alongside` or `record`,
   * see `isBatchable`). Returns the ids whose lease this owner still held.
   */
  readonly finishMany: (finished: ReadonlyArray<Finished>) => Effect.Effect<ReadonlySet<string>>
  /** Gives back the leases of `ids` (and their attempts): due again at once. Returns how many. */
  readonly release: (ids: ReadonlyArray<string>) => Effect.Effect<number>
  /** The earliest time a currently unclaimable pending row becomes claimable, if any, leaving out the rows of `busyKeys`. */
  readonly nextDue: (busyKeys?: ReadonlyArray<string>) => Effect.Effect<Option.Option<Date>>
}

/** Whether a result can be stored by `finishMany` (it needs no statement of its own). */
export const isBatchable = (result: JobResult): boolean => result.alongside === undefined && result.record === undefined

/** The part of every lease owner id of this process: host and pid. */
export const processOwnerPrefix = (): string => `${Os.hostname()}:${process.pid}:`

/** A lease owner id: host, process and a random part, so every runner is distinct. */
export const makeOwner = (): string => `${processOwnerPrefix()}${randomBytes(6).toString("hex")}`

/** Longest error text stored in `last_error`. */
export const MAX_ERROR_LENGTH = 500

const shorten = (error: string): string =>
  error.length <= MAX_ERROR_LENGTH ? error : `${error.slice(0, MAX_ERROR_LENGTH - 1)}…`

/** The queue statements of `jobs` for `owner` (a fresh owner id by default). */
export const make = <A>(
  jobs: JobTable<A>,
  owner: string = makeOwner()
): Effect.Effect<JobQueue<A>, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const t = sql(jobs.table)
    const select = sql.literal(jobs.traced ? `${jobs.select}, ${jobs.traceparent} AS traceparent` : jobs.select)
    const done = jobs.completedStatus
    const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
    const after = (delay: Duration.DurationInput) =>
      Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis + Duration.toMillis(delay)))

    // A row that cannot be decoded would be claimed again and again: dead-letter it.
    const bury = (row: Record<string, unknown>, error: ParseResult.ParseError) =>
      Effect.gen(function*() {
        yield* Effect.logError("Job row could not be decoded; dead-lettered").pipe(
          Effect.annotateLogs({ table: jobs.table, job_id: String(row["id"]), problem: error.message })
        )
        yield* sql`UPDATE ${t} SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL,
          last_error = 'The stored job could not be read.' WHERE id = ${row["id"]}`.pipe(Effect.orDie)
      })

    const fair = jobs.fairness
    const heldUntil = fair?.heldUntil
    const keyColumn = fair === undefined ? undefined : sql(fair.key)
    const claimFunction = jobs.claimFunction === undefined ? undefined : sql(jobs.claimFunction)
    const returning = keyColumn === undefined ? select : sql`${select}, ${t}.${keyColumn} AS job_fair_key`
    const due = (at: Date) =>
      sql`status = 'pending' AND next_attempt_at <= ${at} AND (lease_expires_at IS NULL OR lease_expires_at <= ${at})`

    // A claim or a heartbeat commits without waiting for the disk flush (synchronous_commit off for that
    // statement's transaction alone): one flush less between a job's wake-up and its handler. Lost in a
    // database crash, a lease is simply free again and the job claimed anew, as after any crash (at least
    // once); a job's result is stored with a synchronous commit, which flushes the claim before it.
    const asyncCommit = sql`(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`

    // The rows a claim chose are updated through an array of their ids, so each is found by its primary
    // key: a join with the chosen rows is planned, once the plan is generic (the limit a parameter), as if
    // a tenth of the table were chosen, and a scan of the whole table then looks cheaper (migration 0024).

    // Due order over everything.
    const claimInOrder = (limit: number, at: Date, until: Date) =>
      sql<Record<string, unknown>>`
        UPDATE ${t} SET lease_owner = ${owner}, lease_expires_at = ${until}, attempts = ${t}.attempts + 1
        FROM ${asyncCommit}
        WHERE ${t}.id = ANY (ARRAY(
          SELECT id FROM ${t} WHERE ${due(at)}
          ORDER BY next_attempt_at
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED
        ))
        RETURNING ${t}.id, ${t}.attempts, ${returning}`

    // The keys that have pending rows: a walk over the (key, next_attempt_at) index, one probe per
    // key, so its cost does not grow with a key's backlog nor with finished rows.
    const pendingKeys = (keyColumn: Statement.Identifier) =>
      sql`pending_keys AS (
          (SELECT ${keyColumn} AS key FROM ${t} WHERE status = 'pending' ORDER BY ${keyColumn} LIMIT 1)
          UNION ALL
          SELECT (SELECT ${t}.${keyColumn} FROM ${t} WHERE ${t}.status = 'pending' AND ${t}.${keyColumn} > pending_keys.key
            ORDER BY ${t}.${keyColumn} LIMIT 1)
          FROM pending_keys WHERE pending_keys.key IS NOT NULL
        )`

    // Fair: the oldest due rows of each key, up to its room, the groups taking turns; then lock what was
    // chosen (SKIP LOCKED re-checks that the row is still due, so two claimers never take the same row),
    // one primary key lookup per row: a plan that reads every due row instead is never chosen, whatever
    // the table's statistics say (a fresh backlog is often not analyzed yet).
    const claimFairly = (limit: number, at: Date, until: Date, shares: ClaimShares, keyColumn: Statement.Identifier, group: Statement.Identifier) => {
      const room: Record<string, number> = {}
      for (const [key, running] of shares.running) room[key] = shares.maxPerKey - running
      if (claimFunction !== undefined) {
        return sql<Record<string, unknown>>`SELECT claimed.* FROM ${claimFunction}(${owner}, ${at}, ${until}, ${limit},
          ${shares.maxPerKey}, ${JSON.stringify(room)}::jsonb) AS claimed, ${asyncCommit}`
      }
      return sql<Record<string, unknown>>`
        WITH RECURSIVE room AS (
          SELECT key, value::int AS room FROM jsonb_each_text(${JSON.stringify(room)}::jsonb)
        ), ${pendingKeys(keyColumn)}, candidates AS (
          SELECT c.id, c.job_group, c.next_attempt_at
          FROM pending_keys AS k LEFT JOIN room ON room.key = k.key
          CROSS JOIN LATERAL (
            SELECT id, ${group} AS job_group, next_attempt_at FROM ${t}
            WHERE ${t}.${keyColumn} = k.key AND ${due(at)}
            ORDER BY next_attempt_at
            LIMIT GREATEST(LEAST(COALESCE(room.room, ${shares.maxPerKey}), ${limit}), 0)
          ) AS c
          WHERE k.key IS NOT NULL
        ), turns AS (
          SELECT id, next_attempt_at, row_number() OVER (PARTITION BY job_group ORDER BY next_attempt_at, id) AS turn
          FROM candidates
        ), chosen AS (
          SELECT locked.id FROM (SELECT id FROM turns ORDER BY turn, next_attempt_at LIMIT ${limit}) AS pick
          CROSS JOIN LATERAL (SELECT id FROM ${t} WHERE ${t}.id = pick.id AND ${due(at)} FOR UPDATE SKIP LOCKED) AS locked
        )
        UPDATE ${t} SET lease_owner = ${owner}, lease_expires_at = ${until}, attempts = ${t}.attempts + 1
        FROM ${asyncCommit} WHERE ${t}.id = ANY (ARRAY(SELECT id FROM chosen))
        RETURNING ${t}.id, ${t}.attempts, ${returning}`
    }

    const claim = (limit: number, lease: Duration.Duration, shares?: ClaimShares) =>
      Effect.gen(function*() {
        if (limit <= 0) return []
        const at = yield* now
        const until = new Date(at.getTime() + Duration.toMillis(lease))
        const rows = yield* (fair === undefined || keyColumn === undefined || shares === undefined
          ? claimInOrder(limit, at, until)
          : claimFairly(limit, at, until, shares, keyColumn, sql(fair.group))).pipe(Effect.orDie)
        const claimed: Array<Job<A>> = []
        for (const row of rows) {
          const data = jobs.decode(row)
          if (Either.isRight(data)) claimed.push(jobOf(row, data.right, fair !== undefined))
          else yield* bury(row, data.left)
        }
        return claimed
      })

    const heartbeat = (ids: ReadonlyArray<string>, lease: Duration.Duration) =>
      ids.length === 0
        ? Effect.succeed([])
        : Effect.flatMap(after(lease), (until) =>
          sql<{ id: string }>`UPDATE ${t} SET lease_expires_at = ${until} FROM ${asyncCommit}
            WHERE id IN ${sql.in(ids)} AND lease_owner = ${owner} AND status = 'pending'
            RETURNING id`.pipe(Effect.map((rows) => rows.map((row) => String(row.id))), Effect.orDie))

    // The log rows of `finished`, one INSERT (a CTE of the finishing statement).
    const logged = (rows: ReadonlyArray<Readonly<Record<string, unknown>>>) => {
      if (jobs.log === undefined || rows.length === 0) return undefined
      const log = sql(jobs.log)
      const columns = sql.csv([...new Set(rows.flatMap((row) => Object.keys(row)))].map((column) => sql`${sql(column)}`))
      return sql`INSERT INTO ${log} (${columns})
        SELECT ${columns} FROM jsonb_populate_recordset(NULL::${log}, ${JSON.stringify(rows)}::jsonb)`
    }

    // One statement: the state change (guarded by the owner), extra columns, and optionally one more
    // data-modifying statement alongside (a CTE), so finishing a job is a single round trip.
    const finish = (id: string, assignments: Statement.Fragment, extras: FinishExtras = {}) => {
      const set = extras.set ?? {}
      const more = Object.keys(set).length === 0 ? sql`` : sql`, ${sql.update(set)}`
      const update = sql`UPDATE ${t} SET ${assignments}, lease_owner = NULL, lease_expires_at = NULL ${more}
        WHERE id = ${id} AND lease_owner = ${owner} AND status = 'pending' RETURNING id`
      const log = extras.log === undefined ? undefined : logged([extras.log])
      const statement = extras.alongside === undefined && log === undefined
        ? update
        : sql`WITH changed AS (${update})${extras.alongside === undefined ? sql`` : sql`, alongside AS (${extras.alongside})`}${
          log === undefined ? sql`` : sql`, logged AS (${log})`
        } SELECT id FROM changed`
      return statement.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
    }

    const complete = (id: string, extras?: FinishExtras) => finish(id, sql`status = ${done}, last_error = NULL`, extras)

    const retry = (id: string, delay: Duration.DurationInput, error: string, extras?: FinishExtras) =>
      Effect.flatMap(after(delay), (at) => finish(id, sql`next_attempt_at = ${at}, last_error = ${shorten(error)}`, extras))

    const deadLetter = (id: string, error: string, extras?: FinishExtras) =>
      finish(id, sql`status = 'failed', last_error = ${shorten(error)}`, extras)

    const end = (id: string, status: string, reason: string, extras?: FinishExtras) =>
      finish(id, sql`status = ${status}, last_error = ${shorten(reason)}`, extras)

    // One statement for many results: the rows' new state as JSON typed by the table's own row type,
    // one UPDATE guarded by the lease owner, and the attempt log rows inserted alongside.
    const finishMany = (finished: ReadonlyArray<Finished>): Effect.Effect<ReadonlySet<string>> =>
      Effect.gen(function*() {
        if (finished.length === 0) return new Set<string>()
        const millis = yield* Clock.currentTimeMillis
        const setColumns = new Set<string>()
        const logRows: Array<Readonly<Record<string, unknown>>> = []
        const changes = finished.map(({ id, result }) => {
          for (const column of Object.keys(result.set ?? {})) setColumns.add(column)
          if (result.log !== undefined) logRows.push(result.log)
          const state = JobResult.$match(result, {
            Complete: () => ({ status: done, last_error: null }),
            Retry: ({ delay, error }) => ({
              status: "pending",
              next_attempt_at: new Date(millis + Duration.toMillis(delay)),
              last_error: shorten(error)
            }),
            DeadLetter: ({ error }) => ({ status: "failed", last_error: shorten(error) }),
            End: ({ reason, status }) => ({ status, last_error: shorten(reason) })
          })
          return { ...result.set, ...state, id }
        })
        const viaFunction = jobs.finishFunction
        if (viaFunction !== undefined && [...setColumns].every((column) => viaFunction.columns.includes(column))) {
          const held = yield* sql<{ id: unknown }>`SELECT id FROM ${sql(viaFunction.name)}(${owner}, ${JSON.stringify(changes)}::jsonb,
            ${JSON.stringify(logRows)}::jsonb)`.pipe(Effect.orDie)
          return new Set(held.map((row) => String(row.id)))
        }
        if (viaFunction !== undefined && finished.length > 1) {
          // The results the function stores go through it; the few that set other columns, through the statement.
          const fits = (f: Finished) => Object.keys(f.result.set ?? {}).every((column) => viaFunction.columns.includes(column))
          const [through, apart] = [finished.filter(fits), finished.filter((f) => !fits(f))]
          if (through.length > 0 && apart.length > 0) {
            const [a, b] = yield* Effect.all([finishMany(through), finishMany(apart)])
            return new Set([...a, ...b])
          }
        }
        const assignments = [...setColumns].map((column) =>
          sql`${sql(column)} = CASE WHEN job.job_raw -> ${column} IS NULL THEN ${t}.${sql(column)} ELSE job.${sql(column)} END`
        )
        const extra = assignments.length === 0 ? sql`` : sql`, ${sql.csv(assignments)}`
        const log = logged(logRows)
        const rows = yield* sql<{ id: unknown }>`
          WITH job AS (
            SELECT e.value AS job_raw, r.* FROM jsonb_array_elements(${JSON.stringify(changes)}::jsonb) AS e(value),
              jsonb_populate_record(NULL::${t}, e.value) AS r
          ), changed AS (
            UPDATE ${t} SET status = job.status, last_error = job.last_error,
              next_attempt_at = COALESCE(job.next_attempt_at, ${t}.next_attempt_at),
              lease_owner = NULL, lease_expires_at = NULL ${extra}
            FROM job WHERE ${t}.id = job.id AND ${t}.lease_owner = ${owner} AND ${t}.status = 'pending'
            RETURNING ${t}.id
          )${log === undefined ? sql`` : sql`, logged AS (${log})`}
          SELECT id FROM changed`.pipe(Effect.orDie)
        return new Set(rows.map((row) => String(row.id)))
      })

    const release = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed(0)
        : sql`UPDATE ${t} SET lease_owner = NULL, lease_expires_at = NULL, attempts = GREATEST(${t}.attempts - 1, 0)
            WHERE id IN ${sql.in(ids)} AND lease_owner = ${owner} AND status = 'pending' RETURNING id`.pipe(
            Effect.map((rows) => rows.length),
            Effect.orDie
          )

    // Unleased rows wait for next_attempt_at; leased ones (running somewhere) for their lease's end.
    // Unleased rows of keys that have no room are left out: they are claimed when one of their jobs
    // ends. A fair table is read per key (the walk over its (key, next_attempt_at) index, the first
    // unleased row of each), so a full key's backlog is not read and the table needs no index of
    // next_attempt_at alone (deliveries has none since store migration 0023).
    const nextDue = (busyKeys: ReadonlyArray<string> = []) => {
      const leased = sql`(SELECT min(lease_expires_at) FROM ${t} WHERE status = 'pending' AND lease_expires_at IS NOT NULL)`
      const statement = keyColumn === undefined
        ? sql<{ at: Date | null }>`SELECT LEAST(
            (SELECT min(next_attempt_at) FROM ${t} WHERE status = 'pending' AND lease_expires_at IS NULL), ${leased}
          ) AS at`
        : sql<{ at: Date | null }>`WITH RECURSIVE ${pendingKeys(keyColumn)}
          SELECT LEAST((
            SELECT min(first.at) FROM pending_keys AS k CROSS JOIN LATERAL (
              SELECT ${heldUntil === undefined ? sql`next_attempt_at` : sql`GREATEST(next_attempt_at, ${sql.literal(heldUntil)})`} AS at FROM ${t}
              WHERE ${t}.${keyColumn} = k.key AND status = 'pending' AND lease_expires_at IS NULL
              ORDER BY next_attempt_at LIMIT 1
            ) AS first
            WHERE k.key IS NOT NULL AND k.key NOT IN (SELECT jsonb_array_elements_text(${JSON.stringify(busyKeys)}::jsonb))
          ), ${leased}) AS at`
      return statement.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.at ?? null)),
        Effect.orDie
      )
    }

    return { table: jobs, owner, claim, heartbeat, complete, retry, deadLetter, end, finishMany, release, nextDue }
  })

/**
 * Takes back at once the leases of `jobs` held by other processes, keeping
 * this process's (in-process runners sharing a database keep theirs). Only
 * for a database that belongs to this process alone (embedded PGlite): there
 * another process's lease can only be a dead process's, from before a
 * restart. The attempts stay counted. Returns how many were taken back.
 */
export const releaseOtherProcesses = <A>(jobs: JobTable<A>): Effect.Effect<number, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = processOwnerPrefix()
    const rows = yield* sql`UPDATE ${sql(jobs.table)} SET lease_owner = NULL, lease_expires_at = NULL
      WHERE status = 'pending' AND lease_owner IS NOT NULL AND left(lease_owner, ${prefix.length}) <> ${prefix}
      RETURNING id`.pipe(Effect.orDie)
    return rows.length
  })
