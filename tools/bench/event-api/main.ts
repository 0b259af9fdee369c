/**
 * Event API throughput: autocannon against GET /perform-list of the real
 * `crm-relay serve` binary on real PostgreSQL, with the rate limiter on.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx tools/bench/event-api/main.ts \
 *     [--keys 2000] [--requests-per-key 50] [--connections 50] [--pool 10] [--cpu-prof DIR]
 *
 * Every request carries a different key, round robin over `--keys` keys, and
 * each key makes `--requests-per-key` (< 60) requests in all, so no key ever
 * passes the 60-per-minute limit yet every request pays for authentication
 * and the rate-limit upsert. The server runs in its own process, on a fresh
 * schema of DATABASE_URL that is dropped at the end; a warm-up with other
 * keys runs first. Prints req/s, latency p50/p99, non-2xx count and the
 * server's peak RSS (VmHWM). `--cpu-prof DIR` writes the server's CPU profile
 * there (Node's --cpu-prof) when it stops.
 */
import autocannon from "autocannon"
import { Config, Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { type JsonRequest, jsonClient } from "../support/Http.js"
import { runMain } from "../support/runMain.js"
import { peakRssMiB, serve } from "../support/ServerProcess.js"

const keys = Argv.integer("keys", 2000)
const requestsPerKey = Math.min(Argv.integer("requests-per-key", 50), 59)
const connections = Argv.integer("connections", 50)
const pool = Argv.integer("pool", 10)
const warmupKeys = Math.max(50, Math.floor(keys / 10))
const cpuProfileDir = Argv.text("cpu-prof")

/** `count` integration keys over accounts of ten keys each, through the internal API. */
const createKeys = (post: JsonRequest, adminUrl: string, adminToken: string, count: number) =>
  Effect.gen(function*() {
    const accounts = yield* Effect.forEach(
      Array.from({ length: Math.ceil(count / 10) }, (_, i) => i),
      (i) => post("POST", `${adminUrl}/v1/accounts`, adminToken, { name: `bench-${i}` }),
      { concurrency: 16 }
    )
    return yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => String(accounts[i % accounts.length]!["id"])),
      (accountId) => Effect.map(post("POST", `${adminUrl}/v1/accounts/${accountId}/keys`, adminToken), (k) => String(k["key"])),
      { concurrency: 16 }
    )
  })

/** Runs autocannon with a different key on every request, round robin. */
const load = (url: string, keyList: ReadonlyArray<string>) =>
  Effect.promise(() => {
    let next = 0
    return autocannon({
      url: `${url}/perform-list`,
      connections,
      amount: keyList.length * requestsPerKey,
      timeout: 30,
      requests: [{
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, authorization: `Bearer ${keyList[next++ % keyList.length]}` }
        })
      }]
    })
  })

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const adminToken = randomBytes(24).toString("hex")
  const server = yield* serve({
    databaseUrl: database.url,
    pool,
    adminToken,
    masterKey: randomBytes(32).toString("base64"),
    cpuProfileDir,
    stdout: "ignore",
    logLevel: "Warning",
    stopWithin: "15 seconds"
  })
  const post = yield* jsonClient(16)
  yield* Console.log(`server pid ${server.pid} at ${server.publicUrl}; PostgreSQL ${database.version}; pool ${pool}`)

  const [warm, measured] = yield* Effect.all([
    createKeys(post, server.adminUrl, adminToken, warmupKeys),
    createKeys(post, server.adminUrl, adminToken, keys)
  ])
  yield* Console.log(`warm-up: ${warm.length * requestsPerKey} requests over ${warm.length} keys`)
  yield* load(server.publicUrl, warm)

  yield* Console.log(
    `run: ${measured.length * requestsPerKey} requests over ${measured.length} keys (${requestsPerKey} each, under 60/min), ${connections} connections`
  )
  const result = yield* load(server.publicUrl, measured)
  const rss = yield* peakRssMiB(server.pid)

  yield* Console.log(`status codes: ${JSON.stringify(Object.fromEntries(Object.entries(result.statusCodeStats).map(([k, v]) => [k, v.count])))}`)
  yield* Console.log(`errors: ${result.errors}, timeouts: ${result.timeouts}, non-2xx: ${result.non2xx}`)
  yield* Console.log(`req/s: ${result.requests.average.toFixed(0)}`)
  yield* Console.log(`latency p50: ${result.latency.p50} ms`)
  yield* Console.log(`latency p99: ${result.latency.p99} ms`)
  yield* Console.log(`server peak RSS: ${rss.toFixed(1)} MiB`)
})

void runMain(main)
