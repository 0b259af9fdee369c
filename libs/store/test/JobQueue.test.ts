/**
 * The job queue on a real database (PGlite, or PostgreSQL with
 * DATABASE_URL): batch claims with SKIP LOCKED never hand one row to two
 * claimers, leases expire (TestClock) and make rows claimable again, the
 * heartbeat keeps them, finishing is guarded by the owner, runners wake on
 * NOTIFY and at the next due time, and a clean shutdown releases leases.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Eventually, ListenProbe } from "@crm-relay/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Deferred, Duration, Effect, Fiber, Layer, Logger, LogLevel, Option, Schema, TestClock } from "effect"
import { JobHandoffs } from "../src/JobHandoffs.js"
import type * as JobHandoffsModule from "../src/JobHandoffs.js"
import * as JobQueue from "../src/JobQueue/index.js"
import { Notifier } from "../src/Notifier.js"
import * as TestDatabase from "../src/TestDatabase.js"

let tables = 0

/** Creates a fresh queue table (each test its own) and its JobTable. */
const makeTable = (completedStatus = "done") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const name = `test_jobs_${++tables}`
    yield* sql.unsafe(`CREATE TABLE ${name} (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      label text NOT NULL,
      status text NOT NULL DEFAULT 'pending',
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      lease_owner text,
      lease_expires_at timestamptz,
      last_error text
    )`)
    yield* sql.unsafe(`CREATE INDEX ${name}_due_idx ON ${name} (next_attempt_at) WHERE status = 'pending'`)
    return JobQueue.table({ table: name, completedStatus, row: Schema.Struct({ label: Schema.String }) })
  })

/** A fresh queue table with a receiver column `target` and an `account`, whose claims are fair over them. */
const makeFairTable = Effect.gen(function*() {
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
const insertJobs = (jobs: JobQueue.JobTable<unknown>, count: number, at: Date, prefix = "job") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = Array.from({ length: count }, (_, i) => ({ label: `${prefix}-${i}`, next_attempt_at: at }))
    const inserted = yield* sql<{ id: string }>`INSERT INTO ${sql(jobs.table)} ${sql.insert(rows)} RETURNING id`
    return inserted.map((row) => row.id)
  })

interface Row {
  readonly id: string
  readonly status: string
  readonly attempts: number
  readonly next_attempt_at: Date
  readonly lease_owner: string | null
  readonly lease_expires_at: Date | null
  readonly last_error: string | null
}

const rowOf = (jobs: JobQueue.JobTable<unknown>, id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Row>`SELECT id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error
      FROM ${sql(jobs.table)} WHERE id = ${id}`.pipe(Effect.map((rows) => rows[0]!)))

const rowsOf = (jobs: JobQueue.JobTable<unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Row>`SELECT id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error
      FROM ${sql(jobs.table)} ORDER BY label`)

const { eventually, pause } = Eventually

/**
 * Forks a runner of `jobs` and returns once its LISTEN is live (a wake-up sent
 * from now on reaches it): a notification sent before would be missed until the poll.
 */
const runListening = <R>(
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
const advance = (total: Duration.DurationInput, step: Duration.DurationInput = Duration.seconds(1)) =>
  Effect.gen(function*() {
    const steps = Math.ceil(Duration.toMillis(total) / Duration.toMillis(step))
    for (let i = 0; i < steps; i++) {
      yield* TestClock.adjust(step)
      yield* pause(15)
    }
  })

/** The TestClock set to a realistic time (every test of the file shares the clock). */
const realisticNow = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const at = Math.max(now, Date.UTC(2030, 0, 1)) + 3_600_000
  yield* TestClock.setTime(at)
  return new Date(at)
})

const LEASE = Duration.seconds(30)

layer(TestDatabase.layer)("JobQueue on the TestClock", (it) => {
  it.effect("Claim: one statement claims up to N due rows, sets the lease, counts the attempt, skips rows not yet due", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const due = yield* insertJobs(jobs, 5, now, "due")
      yield* insertJobs(jobs, 2, new Date(now.getTime() + 60_000), "later")
      const queue = yield* JobQueue.make(jobs, "worker-a")
      const first = yield* queue.claim(3, LEASE)
      expect(first).toHaveLength(3)
      expect(first.every((job) => job.attempt === 1 && job.data.label.startsWith("due-"))).toBe(true)
      const row = yield* rowOf(jobs, first[0]!.id)
      expect(row.lease_owner).toBe("worker-a")
      expect(row.lease_expires_at?.getTime()).toBe(now.getTime() + 30_000)
      expect(row.attempts).toBe(1)
      const second = yield* queue.claim(10, LEASE)
      expect(second).toHaveLength(2)
      expect(new Set([...first, ...second].map((job) => job.id))).toEqual(new Set(due))
      expect(yield* queue.claim(10, LEASE)).toEqual([])
    }))

  it.effect("Lease: an expired lease (a worker killed mid-job) makes the row claimable again — nothing is lost, the job runs again as attempt 2", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      const dead = yield* JobQueue.make(jobs, "killed-worker")
      const alive = yield* JobQueue.make(jobs, "other-replica")
      expect((yield* dead.claim(1, LEASE)).map((job) => job.id)).toEqual([id])
      yield* TestClock.adjust(Duration.seconds(29))
      expect(yield* alive.claim(1, LEASE)).toEqual([])
      yield* TestClock.adjust(Duration.seconds(1))
      const again = yield* alive.claim(1, LEASE)
      expect(again.map((job) => [job.id, job.attempt])).toEqual([[id, 2]])
      // The old owner can no longer finish it; the new one can.
      expect(yield* dead.complete(id!)).toBe(false)
      expect(yield* dead.retry(id!, "1 second", "late")).toBe(false)
      expect(yield* dead.deadLetter(id!, "late")).toBe(false)
      expect(yield* alive.complete(id!)).toBe(true)
      expect((yield* rowOf(jobs, id!)).status).toBe("done")
    }))

  it.effect("Lease: the heartbeat extends the lease of a running job, so no other replica takes it while it runs", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      const a = yield* JobQueue.make(jobs, "a")
      const b = yield* JobQueue.make(jobs, "b")
      yield* a.claim(1, LEASE)
      for (let i = 0; i < 6; i++) {
        yield* TestClock.adjust(Duration.seconds(20))
        expect(yield* a.heartbeat([id!], LEASE)).toEqual([id])
        expect(yield* b.claim(1, LEASE)).toEqual([])
      }
      // Another owner's heartbeat holds nothing.
      expect(yield* b.heartbeat([id!], LEASE)).toEqual([])
      expect((yield* rowOf(jobs, id!)).lease_expires_at?.getTime()).toBe(now.getTime() + 120_000 + 30_000)
    }))

  it.effect("Claims and heartbeats commit without waiting for the disk flush, in their own transaction only: the next statement commits durably again", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      const queue = yield* JobQueue.make(jobs, "a")
      const setting = sql<{ synchronous_commit: string }>`SHOW synchronous_commit`.pipe(
        Effect.map((rows) => rows[0]!.synchronous_commit)
      )
      const before = yield* setting
      expect(yield* sql.withTransaction(Effect.zipRight(queue.claim(1, LEASE), setting))).toBe("off")
      expect(yield* setting).toBe(before)
      expect(yield* sql.withTransaction(Effect.zipRight(queue.heartbeat([id!], LEASE), setting))).toBe("off")
      expect(yield* setting).toBe(before)
      expect((yield* rowOf(jobs, id!)).lease_owner).toBe("a")
    }))

  it.effect("Retry at a computed time: pending again, not claimable before, last_error kept; dead-letter: status failed", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [r, d] = yield* insertJobs(jobs, 2, now)
      const queue = yield* JobQueue.make(jobs)
      yield* queue.claim(2, LEASE)
      expect(yield* queue.retry(r!, Duration.minutes(5), "The receiver answered 503.")).toBe(true)
      expect(yield* queue.deadLetter(d!, "x".repeat(2000))).toBe(true)
      const retried = yield* rowOf(jobs, r!)
      expect(retried).toMatchObject({ status: "pending", lease_owner: null, lease_expires_at: null, attempts: 1, last_error: "The receiver answered 503." })
      expect(retried.next_attempt_at.getTime()).toBe(now.getTime() + 300_000)
      const dead = yield* rowOf(jobs, d!)
      expect(dead.status).toBe("failed")
      expect(dead.last_error).toHaveLength(JobQueue.MAX_ERROR_LENGTH)
      yield* TestClock.adjust(Duration.millis(299_999))
      expect(yield* queue.claim(5, LEASE)).toEqual([])
      yield* TestClock.adjust(Duration.millis(1))
      expect((yield* queue.claim(5, LEASE)).map((job) => [job.id, job.attempt])).toEqual([[r, 2]])
      expect(yield* queue.nextDue()).toEqual(Option.some(new Date(now.getTime() + 300_000 + 30_000)))
    }))

  it.effect("Finishing in one statement: extra columns of the row and an alongside statement are written with the state change; the alongside statement runs even when the lease was lost", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`ALTER TABLE ${jobs.table} ADD COLUMN finished_note text`)
      yield* sql.unsafe(`CREATE TABLE ${jobs.table}_log (job_id uuid NOT NULL, note text NOT NULL)`)
      const log = (id: string, note: string) => sql`INSERT INTO ${sql(`${jobs.table}_log`)} (job_id, note) VALUES (${id}, ${note})`
      const [a, b] = yield* insertJobs(jobs, 2, now)
      const queue = yield* JobQueue.make(jobs, "owner")
      yield* queue.claim(2, LEASE)
      expect(yield* queue.complete(a!, { set: { finished_note: "done well" }, alongside: log(a!, "completed") })).toBe(true)
      expect(yield* queue.retry(b!, "1 minute", "later", { alongside: log(b!, "retried") })).toBe(true)
      const other = yield* JobQueue.make(jobs, "not-the-owner")
      expect(yield* other.deadLetter(b!, "stolen", { set: { finished_note: "no" }, alongside: log(b!, "late attempt") })).toBe(false)
      const rows = yield* sql<{ id: string; status: string; finished_note: string | null }>`
        SELECT id, status, finished_note FROM ${sql(jobs.table)} ORDER BY label`
      expect(rows).toEqual([
        { id: a, status: "done", finished_note: "done well" },
        { id: b, status: "pending", finished_note: null }
      ])
      const logged = yield* sql<{ job_id: string; note: string }>`SELECT job_id, note FROM ${sql(`${jobs.table}_log`)}`
      expect(new Set(logged.map((r) => `${r.job_id}:${r.note}`))).toEqual(new Set([`${a}:completed`, `${b}:retried`, `${b}:late attempt`]))
    }))

  it.effect("Finishing many in one statement (the runner's batches): completed, retried, dead-lettered and ended (\"ended with a reason\": gone, aborted) jobs with their columns and log rows; a job whose lease was lost keeps its state but its attempt is still logged", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const sql = yield* SqlClient.SqlClient
      const plain = yield* makeTable()
      const logTable = `${plain.table}_attempts`
      yield* sql.unsafe(`ALTER TABLE ${plain.table} ADD COLUMN finished_at timestamptz`)
      yield* sql.unsafe(`CREATE TABLE ${logTable} (id bigint GENERATED ALWAYS AS IDENTITY, job_id uuid NOT NULL, note text NOT NULL, at timestamptz NOT NULL)`)
      const jobs = JobQueue.table({ table: plain.table, row: Schema.Struct({ label: Schema.String }), log: logTable })
      const [a, b, c, d] = yield* insertJobs(jobs, 4, now)
      const [e] = yield* insertJobs(jobs, 1, new Date(now.getTime() + 3_600_000), "later")
      const queue = yield* JobQueue.make(jobs, "owner")
      yield* queue.claim(4, LEASE)
      const entry = (id: string, note: string) => ({ job_id: id, note, at: now })
      const held = yield* queue.finishMany([
        { id: a!, result: JobQueue.JobResult.Complete({ set: { finished_at: now }, log: entry(a!, "delivered") }) },
        { id: b!, result: JobQueue.JobResult.Retry({ delay: "5 seconds", error: "busy", log: entry(b!, "retry") }) },
        { id: c!, result: JobQueue.JobResult.DeadLetter({ error: "refused", set: { finished_at: now }, log: entry(c!, "failed") }) },
        { id: d!, result: JobQueue.JobResult.End({ status: "gone", reason: "The receiver answered 410.", log: entry(d!, "gone") }) },
        // Never claimed by this owner: not stored, but logged.
        { id: e!, result: JobQueue.JobResult.Complete({ set: { finished_at: now }, log: entry(e!, "late") }) }
      ])
      expect(held).toEqual(new Set([a, b, c, d]))
      const rows = yield* sql<{ id: string; status: string; last_error: string | null; next_attempt_at: Date; finished_at: Date | null; lease_owner: string | null }>`
        SELECT id, status, last_error, next_attempt_at, finished_at, lease_owner FROM ${sql(jobs.table)} ORDER BY label`
      expect(rows.map((r) => [r.status, r.last_error, r.finished_at?.getTime() ?? null, r.lease_owner])).toEqual([
        ["done", null, now.getTime(), null],
        ["pending", "busy", null, null],
        ["failed", "refused", now.getTime(), null],
        ["gone", "The receiver answered 410.", null, null],
        ["pending", null, null, null]
      ])
      expect(rows[1]!.next_attempt_at.getTime()).toBe(now.getTime() + 5_000)
      const logged = yield* sql<{ job_id: string; note: string }>`SELECT job_id, note FROM ${sql(logTable)} ORDER BY id`
      expect(logged.map((r) => `${r.job_id}:${r.note}`)).toEqual([
        `${a}:delivered`, `${b}:retry`, `${c}:failed`, `${d}:gone`, `${e}:late`
      ])
      // One job alone goes through the same statement; the single-row API ends a job too.
      const [f] = yield* insertJobs(jobs, 1, now, "single")
      yield* sql`UPDATE ${sql(jobs.table)} SET status = 'done' WHERE id = ${b!}`
      yield* queue.claim(1, LEASE)
      expect(yield* queue.end(f!, "aborted", "The receiver asked to stop this message.", { log: entry(f!, "aborted") })).toBe(true)
      expect((yield* rowOf(jobs, f!)).status).toBe("aborted")
    }))

  it.effect("Fair claim: one key (a receiver origin) gets at most its room of the slots, other keys' due work is claimed past its backlog, and groups (accounts) take turns", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const sql = yield* SqlClient.SqlClient
      const plain = yield* makeTable()
      yield* sql.unsafe(`ALTER TABLE ${plain.table} ADD COLUMN target text NOT NULL DEFAULT '', ADD COLUMN account text NOT NULL DEFAULT ''`)
      const jobs = JobQueue.table({
        table: plain.table,
        row: Schema.Struct({ label: Schema.String, account: Schema.String }),
        fairness: { key: "target", group: "account" }
      })
      const insert = (count: number, at: Date, target: string, account: string) =>
        sql<{ id: string }>`INSERT INTO ${sql(jobs.table)} ${
          sql.insert(Array.from({ length: count }, (_, i) => ({ label: `${account}-${target}-${i}`, next_attempt_at: at, target, account })))
        } RETURNING id`
      // Account A's silent receiver has 300 jobs due first; B and C have a few, queued later.
      yield* insert(300, new Date(now.getTime() - 60_000), "https://silent.example", "A")
      yield* insert(3, new Date(now.getTime() - 1_000), "https://b.example", "B")
      yield* insert(3, new Date(now.getTime() - 500), "https://c.example", "C")
      const queue = yield* JobQueue.make(jobs, "fair")
      const running = new Map<string, number>()
      const shares: JobQueue.ClaimShares = { maxPerKey: 3, running }
      const count = (claimed: ReadonlyArray<JobQueue.Job<{ label: string; account: string }>>) => {
        for (const job of claimed) running.set(job.key!, (running.get(job.key!) ?? 0) + 1)
        return claimed.map((job) => job.data.account).sort().join("")
      }
      // The accounts take turns (A, B, C, then A's second, the oldest), the silent key only up to its room.
      expect(count(yield* queue.claim(4, LEASE, shares))).toBe("AABC")
      // In due order it would be A, B, B (B is older than C).
      expect(count(yield* queue.claim(3, LEASE, shares))).toBe("ABC")
      // A is full: the claim looks past its 297 due jobs.
      expect(count(yield* queue.claim(10, LEASE, shares))).toBe("BC")
      expect(count(yield* queue.claim(10, LEASE, shares))).toBe("")
      expect(running).toEqual(new Map([["https://silent.example", 3], ["https://b.example", 3], ["https://c.example", 3]]))
      // The next due time leaves out the unleased rows of full keys: the runner waits for a job to end
      // (or, at the latest, for a lease to expire), it does not spin on the silent key's backlog.
      expect(yield* queue.nextDue([...running.keys()])).toEqual(Option.some(new Date(now.getTime() + 30_000)))
      // One of A's jobs ends: one more of A.
      running.set("https://silent.example", 2)
      expect(count(yield* queue.claim(10, LEASE, shares))).toBe("A")
      expect(yield* queue.claim(10, LEASE, shares)).toEqual([])
    }))

  it.effect("Replay: a failed or completed job is queued again, due now, same id, fresh attempt count; a pending one is left alone", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable("delivered")
      const [ok, bad, waiting] = yield* insertJobs(jobs, 3, now)
      const queue = yield* JobQueue.make(jobs)
      yield* queue.claim(2, LEASE)
      yield* queue.complete(ok!)
      yield* queue.deadLetter(bad!, "gone")
      expect((yield* rowOf(jobs, ok!)).status).toBe("delivered")
      yield* TestClock.adjust(Duration.hours(1))
      expect(yield* JobQueue.replay(jobs, ok!)).toBe("queued")
      expect(yield* JobQueue.replay(jobs, bad!)).toBe("queued")
      expect(yield* JobQueue.replay(jobs, waiting!)).toBe("already_pending")
      expect(yield* JobQueue.replay(jobs, "00000000-0000-4000-8000-000000000000")).toBe("not_found")
      const replayed = yield* rowOf(jobs, bad!)
      expect(replayed).toMatchObject({ status: "pending", attempts: 0, last_error: "gone" })
      expect(replayed.next_attempt_at.getTime()).toBe(now.getTime() + 3_600_000)
      const claimed = yield* queue.claim(5, LEASE)
      expect(new Set(claimed.map((job) => job.id))).toEqual(new Set([ok, bad, waiting]))
      expect(claimed.find((job) => job.id === bad)?.attempt).toBe(1)
    }))

  it.effect("Replay with assignments: the table's own columns change with the replay; a pending job keeps them; controls replay without the services in context", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`ALTER TABLE ${jobs.table} ADD COLUMN replays integer NOT NULL DEFAULT 0`)
      const [failed, waiting] = yield* insertJobs(jobs, 2, now)
      const queue = yield* JobQueue.make(jobs)
      yield* queue.claim(1, LEASE)
      yield* queue.deadLetter(failed!, "gone")
      const controls = yield* JobQueue.controls(jobs)
      const replays = (id: string) =>
        sql<{ replays: number }>`SELECT replays FROM ${sql(jobs.table)} WHERE id = ${id}`.pipe(Effect.map((rows) => rows[0]!.replays))
      const assignments = sql`replays = replays + 1`
      // No SqlClient or Notifier in this effect's context: controls carry their own.
      const replay = (id: string) =>
        controls.replay(id, { assignments }).pipe(Effect.mapInputContext((_: Context.Context<never>) => Context.empty()))
      expect(yield* replay(failed!)).toBe("queued")
      expect(yield* replay(waiting!)).toBe("already_pending")
      expect([yield* replays(failed!), yield* replays(waiting!)]).toEqual([1, 0])
      expect(yield* rowOf(jobs, failed!)).toMatchObject({ status: "pending", attempts: 0, lease_owner: null })
    }))

  it.effect("Release: leases given back with their attempt, claimable by another replica at once", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const ids = yield* insertJobs(jobs, 3, now)
      const a = yield* JobQueue.make(jobs, "a")
      const b = yield* JobQueue.make(jobs, "b")
      yield* a.claim(3, LEASE)
      expect(yield* b.release(ids)).toBe(0)
      expect(yield* a.release(ids)).toBe(3)
      const claimed = yield* b.claim(3, LEASE)
      expect(claimed.map((job) => job.attempt)).toEqual([1, 1, 1])
    }))

  it.effect("Restart on an embedded database: leases of other processes (dead ones) are taken back at once, this process's are kept", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [dead, mine] = yield* insertJobs(jobs, 2, now)
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE ${sql(jobs.table)} SET lease_owner = 'old-host:4242:abcdef', lease_expires_at = ${new Date(now.getTime() + 60_000)},
        attempts = 1 WHERE id = ${dead!}`
      yield* sql`UPDATE ${sql(jobs.table)} SET lease_owner = ${JobQueue.makeOwner()}, lease_expires_at = ${new Date(now.getTime() + 60_000)},
        attempts = 1 WHERE id = ${mine!}`
      expect(yield* JobQueue.releaseOtherProcesses(jobs)).toBe(1)
      expect(yield* rowOf(jobs, dead!)).toMatchObject({ lease_owner: null, lease_expires_at: null, attempts: 1 })
      expect((yield* rowOf(jobs, mine!)).lease_owner).not.toBeNull()
      const claimed = yield* (yield* JobQueue.make(jobs)).claim(5, LEASE)
      expect(claimed.map((job) => [job.id, job.attempt])).toEqual([[dead, 2]])
    }))

  it.effect("A stored row that cannot be decoded is dead-lettered instead of being claimed forever", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const plain = yield* makeTable()
      const jobs = JobQueue.table({ table: plain.table, row: Schema.Struct({ label: Schema.NumberFromString }) })
      const [bad] = yield* insertJobs(plain, 1, now, "not-a-number")
      const queue = yield* JobQueue.make(jobs)
      expect(yield* queue.claim(5, LEASE)).toEqual([])
      expect(yield* rowOf(plain, bad!)).toMatchObject({ status: "failed", last_error: "The stored job could not be read." })
    }))

  it.effect("Runner: a retried job runs again exactly when its delay ends (5 s), not before", () =>
    Effect.gen(function*() {
      yield* realisticNow
      const jobs = yield* makeTable()
      const times: Array<number> = []
      const runner = yield* runListening(jobs, (job) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          times.push(now)
          return job.attempt === 1
            ? JobQueue.JobResult.Retry({ delay: Duration.seconds(5), error: "try later" })
            : JobQueue.JobResult.Complete({})
        }), { pollInterval: Duration.hours(1) })
      const [id] = yield* insertJobs(jobs, 1, new Date(yield* Clock.currentTimeMillis))
      yield* JobQueue.wake(jobs)
      // The retry is stored (its due time taken from the clock) before the clock moves.
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.last_error === "try later" && row.lease_owner === null))
      yield* advance(Duration.seconds(4))
      expect(times).toHaveLength(1)
      // The clock stops exactly at the due time, so the second run reads it whenever it gets to run.
      yield* advance(Duration.seconds(1))
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.status === "done"))
      expect(times[1]! - times[0]!).toBe(5_000)
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Runner: a job whose worker died (lease never renewed) is run by another runner once the lease expires", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      // The "killed" worker: claimed, then nothing (no heartbeat, no release).
      yield* (yield* JobQueue.make(jobs, "killed")).claim(1, LEASE)
      const attempts: Array<number> = []
      const runner = yield* JobQueue.run(jobs, (job) =>
        Effect.sync(() => {
          attempts.push(job.attempt)
          return JobQueue.JobResult.Complete({})
        }), { pollInterval: Duration.hours(1), lease: LEASE, reclaimOnPglite: false }).pipe(Effect.fork)
      yield* advance(Duration.seconds(29))
      expect(attempts).toEqual([])
      yield* advance(Duration.seconds(2))
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.status === "done"))
      expect(attempts).toEqual([2])
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Runner: the heartbeat keeps a long job's lease (2 minutes with a 30 s lease) and it completes once", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      let runs = 0
      const runner = yield* JobQueue.run(jobs, () =>
        Effect.sync(() => runs++).pipe(
          Effect.zipRight(Effect.sleep(Duration.minutes(2))),
          Effect.as(JobQueue.JobResult.Complete({}))
        ), { pollInterval: Duration.hours(1), lease: LEASE }).pipe(Effect.fork)
      yield* JobQueue.wake(jobs)
      yield* eventually(Effect.sync(() => runs === 1))
      const other = yield* JobQueue.make(jobs, "other")
      for (let second = 10; second < 120; second += 10) {
        yield* advance(Duration.seconds(10))
        // A heartbeat of the last 10 s has landed: the lease reaches at least 20 s past now.
        const at = yield* Clock.currentTimeMillis
        yield* eventually(Effect.map(rowOf(jobs, id!), (row) => (row.lease_expires_at?.getTime() ?? 0) >= at + 20_000))
        expect(yield* other.claim(1, LEASE)).toEqual([])
      }
      yield* advance(Duration.seconds(11))
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.status === "done"))
      expect(runs).toBe(1)
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Runner: a job whose lease was taken over (its worker stalled past the lease) is stopped at the next heartbeat and cannot store a result", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, now)
      let started = false
      let interrupted = false
      const runner = yield* JobQueue.run(jobs, () =>
        Effect.sync(() => {
          started = true
        }).pipe(
          Effect.zipRight(Effect.never),
          Effect.onInterrupt(() => Effect.sync(() => {
            interrupted = true
          }))
        ), { pollInterval: Duration.hours(1), lease: LEASE }).pipe(Effect.fork)
      yield* JobQueue.wake(jobs)
      yield* eventually(Effect.sync(() => started))
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE ${sql(jobs.table)} SET lease_owner = 'thief' WHERE id = ${id}`
      yield* advance(Duration.seconds(11))
      yield* eventually(Effect.sync(() => interrupted))
      expect(yield* rowOf(jobs, id!)).toMatchObject({ status: "pending", lease_owner: "thief" })
      yield* Fiber.interrupt(runner)
      expect((yield* rowOf(jobs, id!)).lease_owner).toBe("thief")
    }))
})

// The real-clock suite runs without test services, so silence the handler-failure logs it provokes.
const quiet = Layer.merge(TestDatabase.layer, Logger.minimumLogLevel(LogLevel.None))

layer(quiet, { excludeTestServices: true })("JobQueue on the real clock", (it) => {
  it.effect("Concurrent claimers (12 at once, batches of 7) never take the same row, and together take every row", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const ids = yield* insertJobs(jobs, 300, new Date(Date.now() - 1000))
      const claimers = Array.from({ length: 12 }, (_, i) =>
        Effect.gen(function*() {
          const queue = yield* JobQueue.make(jobs, `claimer-${i}`)
          const mine: Array<string> = []
          while (true) {
            const batch = yield* queue.claim(7, LEASE)
            if (batch.length === 0) return mine
            mine.push(...batch.map((job) => job.id))
          }
        }))
      const taken = (yield* Effect.all(claimers, { concurrency: "unbounded" })).flat()
      expect(taken).toHaveLength(ids.length)
      expect(new Set(taken)).toEqual(new Set(ids))
    }))

  it.effect("Several runners share the work: 200 jobs over 3 runners, each job run exactly once", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const ids = yield* insertJobs(jobs, 200, new Date(Date.now() - 1000))
      const runs = new Map<string, number>()
      const byRunner = [0, 0, 0]
      const runners = yield* Effect.forEach([0, 1, 2], (r) =>
        JobQueue.run(jobs, (job) =>
          Effect.sleep(Duration.millis(2)).pipe(
            Effect.zipRight(Effect.sync(() => {
              runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
              byRunner[r]!++
            })),
            Effect.as(JobQueue.JobResult.Complete({}))
          ), { concurrency: 4, pollInterval: Duration.millis(200) }).pipe(Effect.fork))
      yield* eventually(Effect.map(rowsOf(jobs), (rows) => rows.every((row) => row.status === "done")), Duration.minutes(3))
      yield* Effect.forEach(runners, Fiber.interrupt)
      expect(runs.size).toBe(ids.length)
      expect([...runs.values()].every((count) => count === 1)).toBe(true)
      expect(byRunner.filter((count) => count > 0).length).toBeGreaterThan(1)
    }))

  it.effect("Wake-up: with a one-hour poll, NOTIFY from the inserting transaction starts the job at once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* makeTable()
      const started: Array<number> = []
      const runner = yield* runListening(jobs, () =>
        Effect.sync(() => started.push(Date.now())).pipe(Effect.as(JobQueue.JobResult.Complete({}))), {
        pollInterval: Duration.hours(1)
      })
      yield* sql.withTransaction(Effect.zipRight(insertJobs(jobs, 1, new Date(Date.now() - 1000)), JobQueue.wake(jobs)))
      // Within minutes, not the hour of the poll: only the notification can have woken it.
      yield* eventually(Effect.sync(() => started.length === 1))
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Wake-up: the runner's first claim waits for its LISTEN to be in effect, so a job queued meanwhile is not left to the poll", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      // A LISTEN that takes effect only when the test opens the gate; notifications sent before it are lost.
      let requested = false
      let open = false
      const gate = yield* Deferred.make<void>()
      const gated = Effect.map(Notifier, (notifier) =>
        Notifier.of({
          ...notifier,
          subscribe: (channel) =>
            Effect.zipRight(Effect.sync(() => {
              requested = true
            }), Effect.zipRight(Deferred.await(gate), notifier.subscribe(channel)))
        }))
      const seen: Array<boolean> = []
      const runner = yield* JobQueue.run(jobs, () => Effect.sync(() => seen.push(open)).pipe(Effect.as(JobQueue.JobResult.Complete({}))), {
        pollInterval: Duration.hours(1)
      }).pipe(Effect.provideServiceEffect(Notifier, gated), Effect.fork)
      yield* eventually(Effect.sync(() => requested))
      // A runner that claims before listening runs the job now; one that waits cannot, however long this lasts.
      yield* eventually(Effect.sync(() => seen.length > 0), Duration.seconds(1)).pipe(Effect.catchAllDefect(() => Effect.void))
      open = true
      yield* Deferred.succeed(gate, undefined)
      yield* eventually(Effect.sync(() => seen.length === 1))
      expect(seen).toEqual([true])
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Wake-up: a job due in 800 ms runs when it is due, with no further notification and a one-hour poll", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const started: Array<number> = []
      const runner = yield* runListening(jobs, () =>
        Effect.sync(() => started.push(Date.now())).pipe(Effect.as(JobQueue.JobResult.Complete({}))), {
        pollInterval: Duration.hours(1)
      })
      const due = Date.now() + 800
      yield* insertJobs(jobs, 1, new Date(due))
      yield* JobQueue.wake(jobs)
      // Not before it is due, and within minutes rather than the hour of the poll: the due time woke it.
      yield* eventually(Effect.sync(() => started.length === 1))
      expect(started[0]!).toBeGreaterThanOrEqual(due)
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Fair queues: a receiver's backlog larger than its share drains on job ends alone (one-hour poll, no further notification), at most its share running at once, and another key's late work is not held behind it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* makeFairTable
      const insert = (count: number, target: string, account: string) =>
        sql`INSERT INTO ${sql(jobs.table)} ${
          sql.insert(Array.from({ length: count }, (_, i) => ({
            label: `${target}-${i}`,
            next_attempt_at: new Date(Date.now() - 1000),
            target,
            account
          })))
        }`
      const running = new Map<string, number>()
      const most = new Map<string, number>()
      const done = new Map<string, number>()
      const runner = yield* runListening(jobs, (job) =>
        Effect.gen(function*() {
          const target = (job.data as { target: string }).target
          running.set(target, (running.get(target) ?? 0) + 1)
          most.set(target, Math.max(most.get(target) ?? 0, running.get(target)!))
          // Real time (the jobs overlap and end one by one, some while a claim runs), not the hour of the poll.
          yield* pause(Number(job.id.slice(-1) === "0") * 3)
          running.set(target, running.get(target)! - 1)
          done.set(target, (done.get(target) ?? 0) + 1)
          return JobQueue.JobResult.Complete({})
        }), { concurrency: 16, maxPerKey: 8, pollInterval: Duration.hours(1) })
      yield* insert(400, "https://busy.example", "A")
      yield* JobQueue.wake(jobs)
      // Only the ends of the busy key's own jobs can claim the rest of its backlog: one wake-up was sent.
      yield* eventually(Effect.sync(() => (done.get("https://busy.example") ?? 0) >= 100))
      yield* insert(3, "https://late.example", "B")
      yield* JobQueue.wake(jobs)
      yield* eventually(Effect.sync(() => done.get("https://busy.example") === 400 && done.get("https://late.example") === 3))
      expect(most.get("https://busy.example")).toBe(8)
      // Each ran once, and each result is stored.
      yield* eventually(Effect.map(rowsOf(jobs), (rows) => rows.every((row) => row.status === "done")))
      expect((yield* rowsOf(jobs)).filter((row) => row.attempts !== 1)).toEqual([])
      yield* Fiber.interrupt(runner)
    }))

  it.effect("Hand-off (JobHandoffs): a producer of the same process inserts jobs leased to the runner and hands them over — they run at once as attempt 1 with no notification and a one-hour poll; room is reserved within the slots and each key's share, and given back when not used", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* makeFairTable
      const handoffs = yield* Effect.provide(JobHandoffs, JobHandoffs.Default)
      const ran: Array<{ readonly label: string; readonly attempt: number }> = []
      const release = yield* Deferred.make<void>()
      const runner = yield* JobQueue.run(jobs, (job) =>
        Effect.zipRight(
          Effect.sync(() => ran.push({ label: (job.data as { label: string }).label, attempt: job.attempt })),
          Effect.as(Deferred.await(release), JobQueue.JobResult.Complete({}))
        ), { concurrency: 4, maxPerKey: 2, pollInterval: Duration.hours(1) }).pipe(
        Effect.provideService(JobHandoffs, handoffs),
        Effect.fork
      )
      const reserve = (keys: ReadonlyArray<string>) => Effect.sync(() => handoffs.reserve(jobs.table, keys))
      const reserveSoon = (keys: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          let got = Option.none<JobHandoffsModule.Reservation>()
          yield* eventually(Effect.map(reserve(keys), (reservation) => Option.isSome(got = reservation)))
          return Option.getOrThrow(got)
        })
      // Registered once the runner started.
      yield* (yield* reserveSoon(["https://a"])).cancel

      const a = yield* reserveSoon(["https://a", "https://a"])
      // The key is at its share; then the runner is full, and a key with room but no slot left is refused.
      expect(Option.isNone(yield* reserve(["https://a"]))).toBe(true)
      const b = Option.getOrThrow(yield* reserve(["https://b", "https://b"]))
      expect(Option.isNone(yield* reserve(["https://c"]))).toBe(true)
      yield* b.cancel
      const insert = (reservation: JobHandoffsModule.Reservation, labels: ReadonlyArray<string>, target: string) =>
        sql<Record<string, unknown>>`INSERT INTO ${sql(jobs.table)} ${
          sql.insert(labels.map((label) => ({
            label,
            target,
            account: "A",
            lease_owner: reservation.owner,
            lease_expires_at: reservation.until,
            attempts: 1
          })))
        } RETURNING id, attempts, label, target, target AS job_fair_key`
      // One row of the two reserved: the other slot of the key is given back.
      yield* a.adopt(yield* insert(a, ["a-1"], "https://a"))
      yield* eventually(Effect.sync(() => ran.length === 1))
      expect(ran).toEqual([{ label: "a-1", attempt: 1 }])
      const more = Option.getOrThrow(yield* reserve(["https://a"]))
      yield* more.adopt(yield* insert(more, ["a-2"], "https://a"))
      yield* eventually(Effect.sync(() => ran.length === 2))
      // Both of the key's share run now.
      expect(Option.isNone(yield* reserve(["https://a"]))).toBe(true)
      expect(yield* rowsOf(jobs)).toMatchObject([{ status: "pending", attempts: 1 }, { status: "pending", attempts: 1 }])
      yield* Deferred.succeed(release, undefined)
      yield* eventually(Effect.map(rowsOf(jobs), (rows) => rows.every((row) => row.status === "done" && row.attempts === 1)))
      // Every slot is free again once they ended; a stopped runner takes nothing.
      yield* (yield* reserveSoon(["https://a", "https://a", "https://b", "https://c"])).cancel
      yield* Fiber.interrupt(runner)
      expect(Option.isNone(yield* reserve(["https://a"]))).toBe(true)
    }))

  it.effect("Clean shutdown: a running job may finish within the grace period and is stored as done", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      let started = false
      const runner = yield* JobQueue.run(jobs, () =>
        Effect.sync(() => {
          started = true
        }).pipe(Effect.zipRight(Effect.sleep(Duration.millis(300))), Effect.as(JobQueue.JobResult.Complete({}))), {
        // Far longer than the job, however slow the machine: this test is about finishing, not the grace's length.
        shutdownGrace: Duration.minutes(2),
        pollInterval: Duration.millis(100)
      }).pipe(Effect.fork)
      yield* eventually(Effect.sync(() => started))
      yield* Fiber.interrupt(runner)
      expect(yield* rowOf(jobs, id!)).toMatchObject({ status: "done", lease_owner: null, attempts: 1 })
    }))

  it.effect("Clean shutdown: an interrupted worker releases its leases (attempt given back) and another replica picks the job up at once", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      let stuck = false
      const first = yield* JobQueue.run(jobs, () =>
        Effect.sync(() => {
          stuck = true
        }).pipe(Effect.zipRight(Effect.never)), { shutdownGrace: Duration.millis(100), pollInterval: Duration.millis(100), lease: Duration.minutes(10) })
        .pipe(Effect.fork)
      yield* eventually(Effect.sync(() => stuck))
      const picked: Array<{ readonly at: number; readonly attempt: number }> = []
      const second = yield* runListening(jobs, (job) =>
        Effect.sync(() => picked.push({ at: Date.now(), attempt: job.attempt })).pipe(
          Effect.as(JobQueue.JobResult.Complete({}))
        ), { pollInterval: Duration.hours(1) })
      const stopped = Date.now()
      yield* Fiber.interrupt(first)
      yield* eventually(Effect.sync(() => picked.length === 1))
      // Long before the 10-minute lease would have expired (and the hour of the poll): the release woke the other runner.
      expect(picked[0]!.at - stopped).toBeLessThan(Duration.toMillis(Duration.minutes(10)))
      expect(picked[0]!.attempt).toBe(1)
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.status === "done"))
      yield* Fiber.interrupt(second)
    }))

  it.effect("A runner survives a failing database (its table gone for a while): it backs off, keeps trying, and runs the jobs once it is back", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* makeTable()
      const runs: Array<string> = []
      const runner = yield* JobQueue.run(jobs, (job) =>
        Effect.sync(() => runs.push(job.id)).pipe(Effect.as(JobQueue.JobResult.Complete({}))), {
        pollInterval: Duration.millis(100)
      }).pipe(Effect.fork)
      yield* Effect.sleep(Duration.millis(200))
      yield* sql.unsafe(`ALTER TABLE ${jobs.table} RENAME TO ${jobs.table}_away`)
      yield* Effect.sleep(Duration.millis(700))
      yield* sql.unsafe(`ALTER TABLE ${jobs.table}_away RENAME TO ${jobs.table}`)
      const [id] = yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      yield* eventually(Effect.sync(() => runs.length === 1))
      expect(runs).toEqual([id])
      expect(runner.unsafePoll()).toBeNull()
      yield* Fiber.interrupt(runner)
    }))

  it.effect("A handler that dies is retried after the defect delay, with a generic last_error", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      const before = Date.now()
      const runner = yield* JobQueue.run(jobs, () => Effect.dieMessage("boom"), { pollInterval: Duration.millis(100) })
        .pipe(Effect.fork)
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.last_error !== null))
      const row = yield* rowOf(jobs, id!)
      expect(row).toMatchObject({ status: "pending", attempts: 1, lease_owner: null, last_error: "The job failed unexpectedly." })
      // The 30 s defect delay, counted from the failure (which happened between these two instants).
      expect(row.next_attempt_at.getTime()).toBeGreaterThanOrEqual(before + 30_000)
      expect(row.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now() + 30_000)
      yield* Fiber.interrupt(runner)
    }))
})

describe("JobQueue.defectDelay", () => {
  it("doubles from 30 s and stops at one hour", () => {
    expect([1, 2, 3, 8, 50].map((n) => Duration.toMillis(JobQueue.defectDelay(n)))).toEqual([30_000, 60_000, 120_000, 3_600_000, 3_600_000])
  })
})
