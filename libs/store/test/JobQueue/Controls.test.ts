/** The operator's controls of a queue table: replaying a stopped job, with or without the services in context. */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Duration, Effect, Schema, TestClock } from "effect"
import * as JobQueue from "../../src/JobQueue/index.js"
import * as TestDatabase from "../../src/TestDatabase.js"
import { insertJobs, LEASE, makeTable, realisticNow, rowOf } from "./support.js"

layer(TestDatabase.layer)("JobQueue controls on the TestClock", (it) => {
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

  it.effect("Replay of a table holding its final attempt on the row (FinalAttempt): the attempt moves into the log table in the replay's statement and the row's columns are emptied; a row holding none logs nothing", () =>
    Effect.gen(function*() {
      const now = yield* realisticNow
      const sql = yield* SqlClient.SqlClient
      const plain = yield* makeTable()
      const logTable = `${plain.table}_attempts`
      yield* sql.unsafe(`ALTER TABLE ${plain.table} ADD COLUMN final_note text, ADD COLUMN final_at timestamptz`)
      yield* sql.unsafe(`CREATE TABLE ${logTable} (id bigint GENERATED ALWAYS AS IDENTITY, job_id uuid NOT NULL, note text NOT NULL, at timestamptz NOT NULL)`)
      const jobs = JobQueue.table({
        table: plain.table,
        row: Schema.Struct({ label: Schema.String }),
        log: logTable,
        finalAttempt: { present: "final_note", log: { job_id: "id", note: "final_note || ' (' || status || ')'", at: "final_at" }, columns: ["final_note", "final_at"] }
      })
      const [held, bare] = yield* insertJobs(jobs, 2, now)
      const t = sql(jobs.table)
      yield* sql`UPDATE ${t} SET status = 'failed', final_note = 'refused', final_at = ${now} WHERE id = ${held!}`
      yield* sql`UPDATE ${t} SET status = 'failed' WHERE id = ${bare!}`
      expect(yield* JobQueue.replay(jobs, held!)).toBe("queued")
      expect(yield* JobQueue.replay(jobs, bare!)).toBe("queued")
      const logged = yield* sql<{ job_id: string; note: string; at: Date }>`SELECT job_id, note, at FROM ${sql(logTable)} ORDER BY id`
      expect(logged).toEqual([{ job_id: held, note: "refused (failed)", at: now }])
      const rows = yield* sql<{ status: string; final_note: string | null; final_at: Date | null }>`
        SELECT status, final_note, final_at FROM ${t} WHERE id IN (${held!}, ${bare!})`
      expect(rows).toEqual([{ status: "pending", final_note: null, final_at: null }, { status: "pending", final_note: null, final_at: null }])
    }))
})
