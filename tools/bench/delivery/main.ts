/**
 * Webhook delivery throughput and latency: the real `crm-relay serve` binary
 * on real PostgreSQL, an account with one subscription and no bridge
 * connection (so each accepted outcome fans out at once), and a local HTTPS
 * receiver in this process that answers 200 at once.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx tools/bench/delivery/main.ts \
 *     [--outcomes 10000] [--connections 32] [--rate 0] [--pool 10] [--warmup 200] [--no-drain] \
 *     [--cpu-prof DIR] [--server-log FILE]
 *
 * 1. Live: one server (ROLE all) takes `--outcomes` call outcomes on
 *    `POST /v1/calls/{callId}/outcome` over `--connections` concurrent
 *    connections (at most `--rate` per second when given: latency below
 *    saturation) and delivers them as they come. Prints outcomes accepted/s,
 *    deliveries/s (first outcome posted → last delivery), and per call the
 *    time from the 202 (outcome accepted) to the first delivery attempt's
 *    arrival at the receiver: p50/p90/p99/max; and the server's peak RSS.
 * 2. Backlog (unless `--no-drain`): as many outcomes accepted by a ROLE=api
 *    server (no worker), then one ROLE=all server drains the deliveries:
 *    deliveries/s from the first to the last delivery.
 *
 * Duplicates (a webhook-id received twice) are counted; expected 0. Servers
 * run in their own processes on a fresh schema of DATABASE_URL (dropped at
 * the end), with EGRESS_ALLOW_PRIVATE=127.0.0.1/32 and the receiver's CA in
 * NODE_EXTRA_CA_CERTS — otherwise the production egress path.
 * `--cpu-prof DIR` writes each server's CPU profile there when it stops;
 * `--server-log FILE` keeps the servers' log lines (Info and worse).
 */
import { Certificate } from "@crm-relay/testing"
import { Config, Console, Duration, Effect, Option, type Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { type JsonRequest, jsonClient } from "../support/Http.js"
import { type Arrivals, leadOutcome, percentile, startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { peakRssMiB, serve } from "../support/ServerProcess.js"

const outcomes = Argv.integer("outcomes", 10_000, 0)
const connections = Math.max(1, Argv.integer("connections", 32, 0))
const pool = Math.max(1, Argv.integer("pool", 10, 0))
const warmup = Argv.integer("warmup", 200, 0)
const drain = !Argv.flag("no-drain")
/** Outcomes per second offered in the live phase; 0 = as fast as `--connections` allow. */
const rate = Argv.integer("rate", 0, 0)
const serverLog = Argv.text("server-log")
const cpuProfileDir = Argv.text("cpu-prof")

/** What every server process of the run shares. */
interface ServerEnv {
  readonly url: Redacted.Redacted
  readonly adminToken: string
  readonly masterKey: string
  readonly caFile: string
}

/** `crm-relay serve` (ROLE `role`) as a child process for the scope, SIGTERMed at its end. */
const startServer = (env: ServerEnv, role: "all" | "api") =>
  serve({
    databaseUrl: env.url,
    pool,
    adminToken: env.adminToken,
    masterKey: env.masterKey,
    cpuProfileDir,
    stdout: serverLog === undefined ? "ignore" : Fs.openSync(serverLog, "a"),
    logLevel: serverLog === undefined ? "Warning" : "Info",
    env: { ROLE: role, EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: env.caFile },
    stopWithin: "20 seconds"
  })

/**
 * Posts `count` outcomes (call ids `${prefix}-i`), `connections` at a time,
 * outcome i not before i / `perSecond` seconds (when `perSecond` > 0);
 * returns each call's 202 time.
 */
const postOutcomes = (
  call: JsonRequest,
  adminUrl: string,
  adminToken: string,
  accountId: string,
  prefix: string,
  count: number,
  perSecond = 0
) =>
  Effect.gen(function*() {
    const accepted = new Map<string, number>()
    const body = leadOutcome(accountId)
    const start = performance.now()
    yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      (i) =>
        Effect.gen(function*() {
          if (perSecond > 0) {
            const wait = start + (i * 1000) / perSecond - performance.now()
            if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
          }
          const callId = `${prefix}-${i}`
          yield* call("POST", `${adminUrl}/v1/calls/${callId}/outcome`, adminToken, body)
          accepted.set(callId, performance.now())
        }),
      { concurrency: connections, discard: true }
    )
    return accepted
  })

/** Waits until the receiver has a delivery for every call of `accepted` (or `limit` passes). */
const awaitDeliveries = (arrivals: Arrivals, accepted: Map<string, number>, limit: Duration.Duration) =>
  Effect.gen(function*() {
    const deadline = performance.now() + Duration.toMillis(limit)
    const missing = () => [...accepted.keys()].filter((callId) => !arrivals.byCall.has(callId)).length
    while (missing() > 0 && performance.now() < deadline) yield* Effect.sleep("50 millis")
    return missing()
  })

/** Accepted → first-attempt latencies of `accepted` (sorted), and the first and last delivery times. */
const measure = (arrivals: Arrivals, accepted: Map<string, number>) => {
  const latencies: Array<number> = []
  let first = Number.POSITIVE_INFINITY
  let last = 0
  for (const [callId, at] of accepted) {
    const arrived = arrivals.byCall.get(callId)
    if (arrived === undefined) continue
    latencies.push(arrived - at)
    first = Math.min(first, arrived)
    last = Math.max(last, arrived)
  }
  latencies.sort((a, b) => a - b)
  return { latencies, first, last }
}

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const tls = yield* Effect.orDie(Certificate.generateTlsMaterial())
  const runDir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-delivery-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const caFile = Path.join(runDir, "receiver-ca.pem")
  Fs.writeFileSync(caFile, tls.ca)
  const receiver = yield* startReceiver(tls)
  const env: ServerEnv = {
    url: database.url,
    adminToken: randomBytes(24).toString("hex"),
    masterKey: randomBytes(32).toString("base64"),
    caFile
  }
  const { adminToken } = env
  const call = yield* jsonClient(connections)
  yield* Console.log(`PostgreSQL ${database.version}; pool ${pool}; ${connections} connections posting outcomes; ${Os.cpus().length} CPUs`)

  // 1. Live: one server (ROLE all) accepts outcomes and delivers them as they come.
  const accountId = yield* Effect.scoped(Effect.gen(function*() {
    const server = yield* startServer(env, "all")
    const account = yield* call("POST", `${server.adminUrl}/v1/accounts`, adminToken, { name: "bench", mode: "live" })
    const id = String(account["id"])
    const key = yield* call("POST", `${server.adminUrl}/v1/accounts/${id}/keys`, adminToken)
    yield* call("POST", `${server.publicUrl}/subscribe`, String(key["key"]), { targetUrl: receiver.url, event: "lead" })

    if (warmup > 0) {
      const warm = yield* postOutcomes(call, server.adminUrl, adminToken, id, "warmup", warmup)
      const missing = yield* awaitDeliveries(receiver.arrivals, warm, Duration.seconds(60))
      yield* Console.log(`warm-up: ${warmup} outcomes${missing > 0 ? `, ${missing} not delivered` : ""}`)
    }

    yield* Console.log(
      `live: ${outcomes} outcomes → one subscription each, ${rate > 0 ? `offered at ${rate}/s` : "as fast as accepted"}, delivered as they come (one ROLE=all server)`
    )
    const started = performance.now()
    const accepted = yield* postOutcomes(call, server.adminUrl, adminToken, id, "live", outcomes, rate)
    const posted = performance.now()
    const missing = yield* awaitDeliveries(receiver.arrivals, accepted, Duration.minutes(10))
    const { last, latencies } = measure(receiver.arrivals, accepted)
    const rss = yield* peakRssMiB(server.pid)
    yield* Console.log(`  delivered: ${latencies.length} of ${outcomes}${missing > 0 ? ` (${missing} missing after 10 minutes)` : ""}`)
    yield* Console.log(`  outcomes accepted/s: ${(outcomes / ((posted - started) / 1000)).toFixed(0)}`)
    yield* Console.log(`  deliveries/s (first outcome posted → last delivery): ${(latencies.length / ((last - started) / 1000)).toFixed(0)}`)
    yield* Console.log(`  accepted → first attempt p50: ${percentile(latencies, 50).toFixed(1)} ms`)
    yield* Console.log(`  accepted → first attempt p90: ${percentile(latencies, 90).toFixed(1)} ms`)
    yield* Console.log(`  accepted → first attempt p99: ${percentile(latencies, 99).toFixed(1)} ms`)
    yield* Console.log(`  accepted → first attempt max: ${(latencies[latencies.length - 1] ?? Number.NaN).toFixed(1)} ms`)
    yield* Console.log(`  server peak RSS: ${rss.toFixed(1)} MiB`)
    return id
  }))

  // 2. Backlog: outcomes accepted while no worker runs (ROLE api), then one server (ROLE all) drains them.
  if (drain) {
    const accepted = yield* Effect.scoped(Effect.gen(function*() {
      const api = yield* startServer(env, "api")
      return yield* postOutcomes(call, api.adminUrl, adminToken, accountId, "backlog", outcomes)
    }))
    yield* Console.log(`backlog: ${outcomes} deliveries queued with no worker running; one ROLE=all server drains them`)
    yield* Effect.scoped(Effect.gen(function*() {
      const started = performance.now()
      yield* startServer(env, "all")
      const missing = yield* awaitDeliveries(receiver.arrivals, accepted, Duration.minutes(10))
      const { first, last, latencies } = measure(receiver.arrivals, accepted)
      yield* Console.log(`  delivered: ${latencies.length} of ${outcomes}${missing > 0 ? ` (${missing} missing after 10 minutes)` : ""}`)
      yield* Console.log(`  deliveries/s (first → last delivery): ${(latencies.length / ((last - first) / 1000)).toFixed(0)}`)
      yield* Console.log(`  server start → last delivery: ${((last - started) / 1000).toFixed(1)} s`)
    }))
  }
  yield* Console.log(`duplicates (a webhook-id received twice): ${receiver.arrivals.duplicates}`)
})
void runMain(main)
