/** Queue tables and helpers the job queue's tests share: each test makes a fresh table on the file's database. */
import { Eventually, ListenProbe } from "@crm-relay/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, Schema, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import * as JobQueue from "../../src/JobQueue/index.js"
import { Notifier } from "../../src/Notifier.js"

// Table names carry a part of their own per test file: on PostgreSQL the files share one database
// (each its own schema) and NOTIFY channels are named after the table.
const file = randomBytes(3).toString("hex")
let tables = 0

/** Creates a fresh queue table (each test its own) and its JobTable. */
export const makeTable = (completedStatus = "done") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const name = `test_jobs_${file}_${++tables}`
    for (const statement of JobQueue.scratchTableSql(name, ["label text NOT NULL"])) yield* sql.unsafe(statement)
    return JobQueue.table({ table: name, completedStatus, row: Schema.Struct({ label: Schema.String }) })
  })

/** A fresh queue table with a receiver column `target` and an `account`, whose claims are fair over them. */
export const makeFairTable = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const plain = yield* makeTable()
  yield* sql.unsafe(`ALTER TABLE ${plain.table} ADD COLUMN target text NOT NULL DEFAULT '', ADD COLUMN account text NOT NULL DEFAULT ''`)
  return JobQueue.table({
    table: plain.table,
    row: Schema.Struct({ label: Schema.String, target: Schema.String }),
    fairness: { key: "target", group: "account" }
  })
})

/** Inserts `count` jobs due at `at` (labels `${prefix}-i`) and returns their ids. */
export const insertJobs = (jobs: JobQueue.JobTable<unknown>, count: number, at: Date, prefix = "job") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = Array.from({ length: count }, (_, i) => ({ label: `${prefix}-${i}`, next_attempt_at: at }))
    const inserted = yield* sql<{ id: string }>`INSERT INTO ${sql(jobs.table)} ${sql.insert(rows)} RETURNING id`
    return inserted.map((row) => row.id)
  })

/** A queue row's own columns. */
export interface Row {
  readonly id: string
  readonly status: string
  readonly attempts: number
  readonly next_attempt_at: Date
  readonly lease_owner: string | null
  readonly lease_expires_at: Date | null
  readonly last_error: string | null
}

/** The queue columns of row `id`. */
export const rowOf = (jobs: JobQueue.JobTable<unknown>, id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Row>`SELECT id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error
      FROM ${sql(jobs.table)} WHERE id = ${id}`.pipe(Effect.map((rows) => rows[0]!)))

/** The queue columns of every row, by label. */
export const rowsOf = (jobs: JobQueue.JobTable<unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Row>`SELECT id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error
      FROM ${sql(jobs.table)} ORDER BY label`)

const { pause } = Eventually

/**
 * Forks a runner of `jobs` and returns once its LISTEN is live (a wake-up sent
 * from now on reaches it): a notification sent before would be missed until the poll.
 */
export const runListening = <R>(
  jobs: JobQueue.JobTable<unknown>,
  handler: (job: JobQueue.Job<unknown>) => Effect.Effect<JobQueue.JobResult, never, R>,
  options: JobQueue.RunOptions
) =>
  Effect.gen(function*() {
    const probe = ListenProbe.make()
    const probed = Effect.map(Notifier, (notifier) =>
      Notifier.of({
        notify: notifier.notify,
        channel: notifier.channel,
        listen: (channel) => probe.tap(notifier.listen(channel)),
        subscribe: (channel) => Effect.map(notifier.subscribe(channel), probe.tap)
      }))
    const runner = yield* JobQueue.run(jobs, handler, options).pipe(Effect.provideServiceEffect(Notifier, probed), Effect.fork)
    yield* probe.hears(JobQueue.wake(jobs))
    return runner
  })

/** Moves the TestClock forward by `total` in steps, pausing for real I/O after each step. */
export const advance = (total: Duration.DurationInput, step: Duration.DurationInput = Duration.seconds(1)) =>
  Effect.gen(function*() {
    const steps = Math.ceil(Duration.toMillis(total) / Duration.toMillis(step))
    for (let i = 0; i < steps; i++) {
      yield* TestClock.adjust(step)
      yield* pause(15)
    }
  })

/** The TestClock set to a realistic time (every test of the file shares the clock). */
export const realisticNow = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const at = Math.max(now, Date.UTC(2030, 0, 1)) + 3_600_000
  yield* TestClock.setTime(at)
  return new Date(at)
})

/** The lease of the tests' claims. */
export const LEASE = Duration.seconds(30)
