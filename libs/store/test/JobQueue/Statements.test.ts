/**
 * The queue's statements on a real database (PGlite, or PostgreSQL with
 * DATABASE_URL): batch claims with SKIP LOCKED never hand one row to two
 * claimers, leases expire (TestClock) and make rows claimable again, the
 * heartbeat keeps them, and finishing is guarded by the owner.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Layer, Logger, LogLevel, Option, Schema, TestClock } from "effect"
import * as JobQueue from "../../src/JobQueue/index.js"
import * as TestDatabase from "../../src/TestDatabase.js"
import { insertJobs, LEASE, makeFairTable, makeTable, realisticNow, rowOf } from "./support.js"

layer(TestDatabase.layer)("JobQueue statements on the TestClock", (it) => {
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

  it.effect("Wake-time of a fair table, read per key without an index of next_attempt_at alone (deliveries since store migration 0023): the earliest unleased row of any key with room, else the earliest lease's end; finished rows never count", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const sql = yield* SqlClient.SqlClient
      const jobs = yield* makeFairTable
      yield* sql.unsafe(`DROP INDEX ${jobs.table}_due_idx`)
      yield* sql.unsafe(`CREATE INDEX ${jobs.table}_fair_due_idx ON ${jobs.table} (target, next_attempt_at) WHERE status = 'pending'`)
      const at = (seconds: number) => new Date(now.getTime() + seconds * 1000)
      const row = (label: string, target: string, due: number, leasedUntil?: number, status = "pending") => ({
        label,
        target,
        account: "acct",
        status,
        next_attempt_at: at(due),
        lease_owner: leasedUntil === undefined ? null : "elsewhere",
        lease_expires_at: leasedUntil === undefined ? null : at(leasedUntil)
      })
      yield* sql`INSERT INTO ${sql(jobs.table)} ${
        sql.insert([
          // Origin a: a running job (its lease ends at +200 s) and one waiting until +300 s.
          row("a-running", "https://a.example", -10, 200),
          row("a-later", "https://a.example", 300),
          // Origin b: two waiting, the earliest at +90 s.
          row("b-first", "https://b.example", 90),
          row("b-second", "https://b.example", 400),
          // Origin c: only a running job, whose lease ends at +150 s.
          row("c-running", "https://c.example", -20, 150),
          // Finished rows are no work, however early.
          row("d-done", "https://d.example", 5, undefined, "done")
        ])
      }`
      const queue = yield* JobQueue.make(jobs)
      expect(yield* queue.nextDue()).toEqual(Option.some(at(90)))
      // b has no room: its rows wait for one of its jobs to end; c's lease ends before a's waiting row.
      expect(yield* queue.nextDue(["https://b.example"])).toEqual(Option.some(at(150)))
      // Leases count whatever their key: a busy key's running job may be a dead process's.
      yield* sql`UPDATE ${sql(jobs.table)} SET status = 'done', lease_owner = NULL, lease_expires_at = NULL WHERE label = 'c-running'`
      expect(yield* queue.nextDue(["https://a.example", "https://b.example"])).toEqual(Option.some(at(200)))
      yield* sql`UPDATE ${sql(jobs.table)} SET status = 'done', lease_owner = NULL, lease_expires_at = NULL`
      expect(yield* queue.nextDue()).toEqual(Option.none())
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
})

// The real-clock suite runs without test services, so silence the handler-failure logs it provokes.
const quiet = Layer.merge(TestDatabase.layer, Logger.minimumLogLevel(LogLevel.None))

layer(quiet, { excludeTestServices: true })("JobQueue statements on the real clock", (it) => {
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
})
