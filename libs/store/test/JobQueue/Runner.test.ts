/**
 * The runner on a real database (PGlite, or PostgreSQL with DATABASE_URL):
 * retries at their time, leases kept by the heartbeat and taken over when
 * lost, runners wake on NOTIFY and at the next due time, fair shares, hand-
 * overs, and a clean shutdown releases leases.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Eventually } from "@crm-relay/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Pg from "pg"
import { Clock, Deferred, Duration, Effect, Fiber, Layer, Logger, LogLevel, Option } from "effect"
import { JobHandoffs } from "../../src/JobHandoffs.js"
import type * as JobHandoffsModule from "../../src/JobHandoffs.js"
import * as JobQueue from "../../src/JobQueue/index.js"
import { Notifier } from "../../src/Notifier.js"
import * as TestDatabase from "../../src/TestDatabase.js"
import { advance, insertJobs, LEASE, makeFairTable, makeTable, realisticNow, rowOf, rowsOf, runListening } from "./support.js"

const { eventually, pause } = Eventually

layer(TestDatabase.layer)("JobQueue runner on the TestClock", (it) => {
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

layer(quiet, { excludeTestServices: true })("JobQueue runner on the real clock", (it) => {
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

  it.effect("issue 41: a handler that dies of a dropped database connection (57P01, 25006 after a failover) is retried as transient: after 1 s, not the defect delay", () =>
    Effect.gen(function*() {
      const jobs = yield* makeTable()
      const [id] = yield* insertJobs(jobs, 1, new Date(Date.now() - 1000))
      const before = Date.now()
      const shutdown = Object.assign(new Pg.DatabaseError("terminating connection due to administrator command", 0, "error"), {
        code: "57P01",
        severity: "FATAL"
      })
      const runner = yield* JobQueue.run(jobs, () => Effect.die(new SqlError({ cause: shutdown, message: "Failed to execute statement" })), {
        pollInterval: Duration.millis(100)
      }).pipe(Effect.fork)
      yield* eventually(Effect.map(rowOf(jobs, id!), (row) => row.last_error !== null))
      const row = yield* rowOf(jobs, id!)
      expect(row).toMatchObject({ status: "pending", attempts: 1, lease_owner: null, last_error: "The database connection was lost; retrying." })
      expect(row.next_attempt_at.getTime()).toBeGreaterThanOrEqual(before + 1_000)
      expect(row.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now() + 1_000)
      yield* Fiber.interrupt(runner)
    }))
})

describe("JobQueue.defectDelay", () => {
  it("doubles from 30 s and stops at one hour", () => {
    expect([1, 2, 3, 8, 50].map((n) => Duration.toMillis(JobQueue.defectDelay(n)))).toEqual([30_000, 60_000, 120_000, 3_600_000, 3_600_000])
  })
})
