/**
 * The job queue's own cost per job: `JobQueue.run` drains a fair queue table
 * whose handler does nothing (`Effect.void`, then Complete), so what is
 * measured is the runner's work per job (its fiber, span, log annotations,
 * result hand-off, metrics) and the claim and finish statements' client side.
 *
 *   npm run bench:queue-overhead -- [--jobs 2000] [--rounds 3] [--keys 64] [--concurrency 128] [--batch 32]
 *
 * On PGlite in process by default (the database's CPU counts too), on the
 * PostgreSQL of DATABASE_URL when set (a schema of its own, dropped after;
 * the server's CPU is not counted). Prints, per round, the process CPU µs per
 * job over the drain, and the median. Compare builds by alternating runs:
 * under a CPU simulator, a few hundred jobs' difference in `--jobs` is lost in
 * the start-up's own variation (compiling, JIT, GC), so instruction counts
 * need many thousands of jobs per run.
 */
import { JobQueue, TestDatabase } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Console, Deferred, Effect, Fiber, Schema } from "effect"
import * as Argv from "../support/Argv.js"
import { runMain } from "../support/runMain.js"

const jobs = Argv.integer("jobs", 2000, 0)
const rounds = Argv.integer("rounds", 3)
const keys = Argv.integer("keys", 64)
const concurrency = Argv.integer("concurrency", 128)
const batchSize = Argv.integer("batch", 32)

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const round = (n: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const name = `queue_overhead_${n}`
    const own = ["label text NOT NULL", "target text NOT NULL", "account text NOT NULL"]
    for (const statement of JobQueue.scratchTableSql(name, own)) yield* sql.unsafe(statement)
    yield* sql.unsafe(`CREATE INDEX ${name}_key_idx ON ${name} (target, next_attempt_at) WHERE status = 'pending'`)
    const table = JobQueue.table({
      table: name,
      row: Schema.Struct({ label: Schema.String, target: Schema.String }),
      fairness: { key: "target", group: "account" }
    })
    for (let from = 0; from < jobs; from += 1000) {
      const rows = Array.from({ length: Math.min(1000, jobs - from) }, (_, i) => ({
        label: `job-${from + i}`,
        target: `https://receiver-${(from + i) % keys}.example`,
        account: `account-${(from + i) % 8}`
      }))
      yield* sql`INSERT INTO ${sql(name)} ${sql.insert(rows)}`
    }
    let handled = 0
    const allHandled = yield* Deferred.make<void>()
    if (jobs === 0) yield* Deferred.succeed(allHandled, undefined)
    const before = process.cpuUsage()
    const started = performance.now()
    const runner = yield* JobQueue.run(table, () =>
      Effect.zipRight(
        Effect.void,
        Effect.sync(() => {
          if (++handled === jobs) Deferred.unsafeDone(allHandled, Effect.void)
          return JobQueue.JobResult.Complete({})
        })
      ), { concurrency, batchSize }).pipe(Effect.fork)
    yield* Deferred.await(allHandled)
    // The last results are stored once the handlers decided: the drain ends when no row is left pending.
    while (true) {
      const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(name)} WHERE status = 'pending'`
      if (left!.n === 0) break
      yield* Effect.sleep("5 millis")
    }
    const cpu = process.cpuUsage(before)
    const wall = performance.now() - started
    yield* Fiber.interrupt(runner)
    yield* sql.unsafe(`DROP TABLE ${name}`)
    const perJob = jobs === 0 ? 0 : (cpu.user + cpu.system) / jobs
    yield* Console.log(`round ${n}: ${jobs} jobs in ${wall.toFixed(0)} ms, CPU ${perJob.toFixed(0)} µs/job`)
    return perJob
  })

runMain(
  Effect.gen(function*() {
    const perJob: Array<number> = []
    for (let n = 1; n <= rounds; n++) perJob.push(yield* round(n))
    yield* Console.log(`queue overhead: median ${median(perJob).toFixed(0)} µs CPU per job (${jobs} jobs, ${keys} keys, concurrency ${concurrency}, batch ${batchSize})`)
  }).pipe(Effect.provide(TestDatabase.layer))
)
