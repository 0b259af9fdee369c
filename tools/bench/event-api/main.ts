/**
 * Event API throughput: autocannon against GET /perform-list of the real
 * `crm-relay serve` binary on real PostgreSQL, with the rate limiter on, and
 * against a raw `node:http` + `pg` baseline (RawServer.ts) that runs the
 * same three statements on the same database with the same kind of keys
 * (crm-relay sends the three as one statement, one round trip per request).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:event-api -- \
 *     [--rounds 3] [--keys 400] [--requests-per-key 50] [--connections 50] [--pool 10] [--cpu-prof DIR]
 *     [--node-options FLAGS] [--baseline PATH]
 *
 * Every request carries a different key, round robin over `--keys` keys, and
 * each key makes `--requests-per-key` (< 60) requests in all, so no key ever
 * passes the 60-per-minute limit yet every request pays for authentication
 * and the rate-limit upsert. Both servers run in their own processes, on one
 * fresh schema of DATABASE_URL that is dropped at the end; each is warmed up
 * first, then `--rounds` rounds alternate between them (the order flips every
 * round, and every round uses fresh keys), so a machine busy with other work
 * slows both alike. Prints each round, then for each server the medians of
 * req/s, latency p50/p99, server CPU per request (utime + stime of its
 * process over the round) and PostgreSQL CPU per request (the same of the
 * backends serving that server, found by their application_name; shown when
 * PostgreSQL runs on this machine), its peak RSS (VmHWM), and the ratio
 * crm-relay / raw.
 * `--cpu-prof DIR` writes crm-relay's CPU profile there (Node's --cpu-prof)
 * when it stops; `--node-options FLAGS` runs crm-relay with those Node/V8
 * flags (NODE_OPTIONS), e.g. `--node-options --max-semi-space-size=16`.
 * `--baseline PATH` (another build's `apps/server/bin/crm-relay.js`) serves
 * too, on the same schema, in every round, the order rotating with the
 * others, and prints its figures as `baseline` with the ratios of this
 * checkout's to its: two builds compared in one run, where only figures of
 * the same run compare. Both builds name their backends `crm-relay`, so the
 * PostgreSQL CPU of a crm-relay round also counts the idle build's backends
 * (next to nothing: only the loaded server queries).
 * HEAP_SEMI_SPACE_MIB and HEAP_GROWTH_PERCENT set in the bench's environment
 * are crm-relay's heap budget, e.g. `HEAP_SEMI_SPACE_MIB=4 npm run bench:...`;
 * MALLOC_ARENA_MAX set there is passed to crm-relay too (glibc's malloc arenas).
 */
import { Events } from "@crm-relay/contract"
import autocannon from "autocannon"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Config, Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as Argv from "../support/Argv.js"
import { backendCpu, backendCpuSince } from "../support/BackendCpu.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { type JsonRequest, jsonClient } from "../support/Http.js"
import { runMain } from "../support/runMain.js"
import { cpuSeconds, peakRssMiB, serve } from "../support/ServerProcess.js"
import { serveRaw } from "./RawBaseline.js"

const rounds = Argv.integer("rounds", 3)
const keys = Argv.integer("keys", 400)
const requestsPerKey = Math.min(Argv.integer("requests-per-key", 50), 59)
const connections = Argv.integer("connections", 50)
const pool = Argv.integer("pool", 10)
const warmupKeys = Math.max(20, Math.floor(keys / 4))
const cpuProfileDir = Argv.text("cpu-prof")
const nodeOptions = Argv.text("node-options")
const baselineBin = Argv.text("baseline")

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
      // autocannon sees that the last answer came at its next sample tick (every second by default):
      // a round's duration, and so its req/s, would be rounded up to a whole second.
      sampleInt: 50,
      requests: [{
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, authorization: `Bearer ${keyList[next++ % keyList.length]}` }
        })
      }]
    })
  })

/** The servers a run can measure. */
type Name = "crm-relay" | "baseline" | "raw"

/** One server under load for one round. */
interface Round {
  readonly reqPerSec: number
  readonly p50: number
  readonly p99: number
  readonly cpuMsPerRequest: number
  /** NaN when PostgreSQL's processes cannot be read (another machine). */
  readonly pgCpuMsPerRequest: number
  readonly failed: number
}

/** Loads the server at `url` (process `pid`, backends `applicationName`) with `keyList`, measuring CPU over the round. */
const measure = (admin: PgClient.PgClient, url: string, pid: number, applicationName: string, keyList: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const before = yield* cpuSeconds(pid)
    const backends = admin`application_name = ${applicationName}`
    const pgBefore = yield* backendCpu(admin, backends)
    const result = yield* load(url, keyList)
    const after = yield* cpuSeconds(pid)
    const pgUsed = yield* backendCpuSince(admin, backends, pgBefore)
    const answered = result.requests.total
    return {
      reqPerSec: answered / Math.max(0.001, result.duration),
      p50: result.latency.p50,
      p99: result.latency.p99,
      cpuMsPerRequest: ((after - before) * 1000) / Math.max(1, answered),
      pgCpuMsPerRequest: (pgUsed * 1000) / Math.max(1, answered),
      failed: result.errors + result.timeouts + result.non2xx
    } satisfies Round
  })

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const describeRound = (name: string, round: Round): string =>
  `${name.padEnd(9)} ${round.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${String(round.p50).padStart(4)} ms  p99 ${
    String(round.p99).padStart(4)
  } ms  CPU ${round.cpuMsPerRequest.toFixed(3)} ms/request${
    Number.isNaN(round.pgCpuMsPerRequest) ? "" : `  PostgreSQL CPU ${round.pgCpuMsPerRequest.toFixed(3)} ms/request`
  }${round.failed > 0 ? `  FAILED ${round.failed}` : ""}`

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const admin = yield* PgClient.make({ url: base.value, maxConnections: 1 })
  const adminToken = randomBytes(24).toString("hex")
  // One master key for both builds: they share the schema (and so its keys).
  const masterKey = randomBytes(32).toString("base64")
  const crmRelay = (bin: string | undefined) =>
    serve({
      bin,
      databaseUrl: database.url,
      pool,
      adminToken,
      masterKey,
      cpuProfileDir: bin === undefined ? cpuProfileDir : undefined,
      nodeOptions,
      stdout: "ignore",
      logLevel: "Warning",
      stopWithin: "15 seconds"
    })
  const server = yield* crmRelay(undefined)
  const other = baselineBin === undefined ? undefined : yield* crmRelay(baselineBin)
  const raw = yield* serveRaw({ databaseUrl: database.url, pool, sample: JSON.stringify([Events.SAMPLE_PREVIEW]) })
  const post = yield* jsonClient(16)
  yield* Console.log(
    `crm-relay pid ${server.pid} at ${server.publicUrl}; ${
      other === undefined ? "" : `baseline (${baselineBin}) pid ${other.pid} at ${other.publicUrl}; `
    }raw pid ${raw.pid} at ${raw.url}`
  )
  yield* Console.log(`PostgreSQL ${database.version}; pool ${pool} each; ${connections} connections`)

  const servers: ReadonlyArray<{ readonly name: Name; readonly url: string; readonly pid: number; readonly applicationName: string }> = [
    { name: "crm-relay", url: server.publicUrl, pid: server.pid, applicationName: "crm-relay" },
    ...(other === undefined ? [] : [{ name: "baseline" as const, url: other.publicUrl, pid: other.pid, applicationName: "crm-relay" }]),
    { name: "raw", url: raw.url, pid: raw.pid, applicationName: "crm-relay-bench-raw" }
  ]
  // Every round of every server gets its own keys, so no key reaches the limit.
  const n = servers.length
  const all = yield* createKeys(post, server.adminUrl, adminToken, n * warmupKeys + n * rounds * keys)
  const slice = (i: number, size: number, from: number) => all.slice(from + i * size, from + (i + 1) * size)

  yield* Console.log(`warm-up: ${warmupKeys * requestsPerKey} requests each`)
  yield* Effect.forEach(servers, (s, i) => load(s.url, slice(i, warmupKeys, 0)), { discard: true })

  yield* Console.log(`${rounds} rounds of ${keys * requestsPerKey} requests over ${keys} keys (${requestsPerKey} each, under 60/min)`)
  const results: Record<Name, Array<Round>> = { "crm-relay": [], baseline: [], raw: [] }
  for (let r = 0; r < rounds; r++) {
    // Each server goes first in turn, so none is always measured on a machine its predecessor warmed.
    const order = servers.map((_, i) => (i + r) % n)
    for (const i of order) {
      const s = servers[i]!
      const round = yield* measure(admin, s.url, s.pid, s.applicationName, slice(r * n + i, keys, n * warmupKeys))
      results[s.name].push(round)
      yield* Console.log(`round ${r + 1}: ${describeRound(s.name, round)}`)
    }
  }

  const summary = (name: Name) => {
    const list = results[name]
    return {
      reqPerSec: median(list.map((x) => x.reqPerSec)),
      p50: median(list.map((x) => x.p50)),
      p99: median(list.map((x) => x.p99)),
      cpuMsPerRequest: median(list.map((x) => x.cpuMsPerRequest)),
      pgCpuMsPerRequest: median(list.map((x) => x.pgCpuMsPerRequest)),
      failed: list.reduce((n, x) => n + x.failed, 0)
    } satisfies Round
  }
  const ours = summary("crm-relay")
  const theirs = summary("raw")
  const [ourRss, rawRss] = yield* Effect.all([peakRssMiB(server.pid), peakRssMiB(raw.pid)])
  const ratios = (a: Round, aRss: number, b: Round, bRss: number) =>
    `throughput ${(a.reqPerSec / b.reqPerSec).toFixed(2)}x, CPU per request ${(a.cpuMsPerRequest / b.cpuMsPerRequest).toFixed(2)}x, PostgreSQL CPU per request ${
      (a.pgCpuMsPerRequest / b.pgCpuMsPerRequest).toFixed(2)
    }x, p50 ${(a.p50 / b.p50).toFixed(2)}x, p99 ${(a.p99 / b.p99).toFixed(2)}x, peak RSS ${(aRss / bRss).toFixed(2)}x`
  yield* Console.log(`medians of ${rounds} rounds:`)
  const before = other === undefined ? undefined : { round: summary("baseline"), rss: yield* peakRssMiB(other.pid) }
  yield* Console.log(`${describeRound("crm-relay", ours)}  peak RSS ${ourRss.toFixed(1)} MiB`)
  if (before !== undefined) yield* Console.log(`${describeRound("baseline", before.round)}  peak RSS ${before.rss.toFixed(1)} MiB`)
  yield* Console.log(`${describeRound("raw", theirs)}  peak RSS ${rawRss.toFixed(1)} MiB`)
  yield* Console.log(`crm-relay/raw: ${ratios(ours, ourRss, theirs, rawRss)}`)
  if (before !== undefined) {
    yield* Console.log(`baseline/raw: ${ratios(before.round, before.rss, theirs, rawRss)}`)
    yield* Console.log(`crm-relay/baseline: ${ratios(ours, ourRss, before.round, before.rss)}`)
  }
})

void runMain(main)
