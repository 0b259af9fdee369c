/**
 * Retention while deliveries flow: does pruning a large number of finished
 * rows raise the delivery queue's claim latency?
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx tools/bench/retention/main.ts \
 *     [--rows 1000000] [--phase-seconds 15] [--rounds 6] [--batch 500] [--pause-ms 100]
 *
 * On a fresh schema of DATABASE_URL (dropped at the end): `--rows` finished
 * deliveries (delivered, with one attempt row each) created 40 days ago, so
 * all are past the 30-day retention. Deliveries then flow the way the worker
 * sees them: a producer queues 32 pending deliveries at a time and a
 * consumer claims them (`JobQueue` claim of the `deliveries` table, 32 at
 * a time, 30 s lease) and completes each with its attempt row, in a loop.
 *
 * Phases alternate, `--phase-seconds` each, `--rounds` times: `without`
 * (no pruning) and `during` (`Retention.round` with `--batch` rows per
 * statement and `--pause-ms` between statements, interrupted at the phase's
 * end and resumed in the next). Prints claim latency p50/p99/max of both
 * (over all their phases), the ratio, the rows pruned and their rate, and
 * the load average at start and end.
 */
import { JobQueue, Migrations, Retention } from "@crm-relay/store"
import * as Database from "@crm-relay/store/Database"
import { Deliveries } from "@crm-relay/events"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Console, Duration, Effect, Fiber, Layer, Logger, LogLevel, Metric, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as Os from "node:os"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { runMain } from "../support/runMain.js"
import { leadPayload } from "../support/SamplePayload.js"

const rows = Argv.integer("rows", 1_000_000, 0)
const phaseSeconds = Argv.integer("phase-seconds", 15)
const rounds = Argv.integer("rounds", 6)
const batch = Argv.integer("batch", 500)
const pauseMs = Argv.integer("pause-ms", 100, 0)
const CLAIM = 32

const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
const ms = (n: number) => `${n.toFixed(2)} ms`
const load = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")

const seed = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [account] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES ('bench', 'live') RETURNING id`
  const [key] = yield* sql<{ id: string }>`INSERT INTO integration_keys (account_id, secret_hash)
    VALUES (${account!.id}, decode(repeat('ab', 32), 'hex')) RETURNING id`
  const [subscription] = yield* sql<{ id: string }>`INSERT INTO subscriptions (account_id, created_by_key_id, target_url, event)
    VALUES (${account!.id}, ${key!.id}, 'https://receiver.example/hook', 'lead') RETURNING id`
  const payload = leadPayload
  const chunk = 100_000
  for (let done = 0; done < rows; done += chunk) {
    const n = Math.min(chunk, rows - done)
    yield* sql`WITH made AS (
        INSERT INTO deliveries (account_id, subscription_id, event, call_id, target_url, payload, status, attempts,
          next_attempt_at, created_at, delivered_at)
        SELECT ${account!.id}, ${subscription!.id}, 'lead', 'call-' || g, 'https://receiver.example/hook', ${payload}::jsonb,
          'delivered', 1, now() - interval '40 days', now() - interval '40 days' + g * interval '1 millisecond',
          now() - interval '40 days'
        FROM generate_series(1, ${n}) AS g
        RETURNING id, created_at
      )
      INSERT INTO delivery_attempts (delivery_id, attempt, started_at, status_code, duration_ms, result)
      SELECT id, 1, created_at, 200, 12, 'delivered' FROM made`
  }
  yield* sql`ANALYZE deliveries`
  yield* sql`ANALYZE delivery_attempts`
  return { accountId: account!.id, subscriptionId: subscription!.id, payload }
})

const main = Effect.gen(function*() {
  const base = yield* Config.redacted("DATABASE_URL").pipe(Effect.orElseFail(() => new Error("Set DATABASE_URL to a PostgreSQL database.")))
  const { url, version } = yield* freshSchema(base)
  const context = yield* Layer.build(
    Migrations.layer.pipe(Layer.provideMerge(Database.layerPostgres({ url, poolSize: 6 })))
  )
  yield* Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* Console.log(`PostgreSQL ${version}; load average at start: ${load()}`)
    const seeding = Date.now()
    const { accountId, payload, subscriptionId } = yield* seed
    yield* Console.log(`seeded ${rows} finished deliveries (+ ${rows} attempts) in ${((Date.now() - seeding) / 1000).toFixed(1)} s`)

    const queue = yield* JobQueue.make(Deliveries.table)
    const latencies = { without: [] as Array<number>, during: [] as Array<number> }
    let phase: "without" | "during" = "without"
    let flowed = 0

    // Producer and consumer in one loop: queue 32, claim and complete them, time the claim.
    const flow = Effect.gen(function*() {
      const fresh = Array.from({ length: CLAIM }, () => ({
        id: randomUUID(),
        account_id: accountId,
        subscription_id: subscriptionId,
        event: "lead",
        call_id: "flow",
        target_url: "https://receiver.example/hook",
        payload
      }))
      yield* sql`INSERT INTO deliveries ${sql.insert(fresh)}`
      const started = performance.now()
      const claimed = yield* queue.claim(CLAIM, Duration.seconds(30))
      latencies[phase].push(performance.now() - started)
      yield* Effect.forEach(claimed, (job) =>
        queue.complete(job.id, {
          set: { delivered_at: new Date() },
          alongside: Deliveries.attemptStatement(sql, {
            delivery_id: job.id,
            attempt: job.attempt,
            started_at: new Date(),
            status_code: 200,
            duration_ms: 5,
            error_class: null,
            error: null,
            result: "delivered"
          })
        }), { concurrency: 4, discard: true })
      flowed += claimed.length
      yield* Effect.sleep(Duration.millis(20))
    }).pipe(Effect.forever)

    const policy: Retention.RetentionPolicy = {
      ...Retention.DEFAULT_POLICY,
      batchSize: batch,
      pause: Duration.millis(pauseMs)
    }
    const prunedNow = Effect.map(
      Metric.value(Metric.tagged(Retention.prunedRows, "table", "deliveries")),
      (state) => state.count
    )
    const flowing = yield* Effect.fork(flow)
    let pruningSeconds = 0
    for (let round = 1; round <= rounds; round++) {
      phase = "without"
      yield* Effect.sleep(Duration.seconds(phaseSeconds))
      phase = "during"
      const before = yield* prunedNow
      const pruning = yield* Effect.fork(Retention.round(policy))
      const began = performance.now()
      const finished = yield* Fiber.join(pruning).pipe(Effect.timeoutOption(Duration.seconds(phaseSeconds)))
      pruningSeconds += (performance.now() - began) / 1000
      if (Option.isNone(finished)) yield* Fiber.interrupt(pruning)
      const after = yield* prunedNow
      yield* Console.log(`round ${round}: pruned ${after - before} deliveries; load ${load()}`)
      if (Option.isSome(finished)) {
        // Nothing left to prune: the rest of the phase runs without.
        phase = "without"
        break
      }
    }
    yield* Fiber.interrupt(flowing)

    const total = yield* prunedNow
    const left = yield* sql<{ n: string | number }>`SELECT count(*) AS n FROM deliveries WHERE status <> 'pending' AND created_at < now() - interval '30 days'`
    const report = (name: string, values: Array<number>) => {
      const sorted = [...values].sort((a, b) => a - b)
      return { name, n: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1] ?? Number.NaN }
    }
    const without = report("without pruning", latencies.without)
    const during = report("during pruning", latencies.during)
    for (const r of [without, during]) {
      yield* Console.log(`claim latency ${r.name}: n=${r.n} p50 ${ms(r.p50)} p99 ${ms(r.p99)} max ${ms(r.max)}`)
    }
    yield* Console.log(`ratio during/without: p50 ${(during.p50 / without.p50).toFixed(2)}x, p99 ${(during.p99 / without.p99).toFixed(2)}x`)
    yield* Console.log(
      `pruned ${total} deliveries in ${pruningSeconds.toFixed(1)} s of pruning (${(total / Math.max(pruningSeconds, 0.001)).toFixed(0)} rows/s, batch ${batch}, pause ${pauseMs} ms); ` +
        `${Number(left[0]?.n ?? 0)} old rows left; ${flowed} deliveries flowed`
    )
    yield* Console.log(`load average at end: ${load()}`)
  }).pipe(Effect.provide(context))
}).pipe(Effect.provide(Logger.minimumLogLevel(LogLevel.Warning)))

runMain(main)
