/**
 * Webhook delivery against a peer: the real `crm-relay serve` binary and
 * graphile-worker 0.16.6 (GraphilePeer.ts: the same work per job — Standard
 * Webhooks signature, HTTPS POST to the same loopback receiver, an attempt
 * row) on the same PostgreSQL, in alternating rounds; a local HTTPS receiver
 * in this process answers 200 at once.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_queue npm run bench:delivery -- \
 *     [--rounds 2] [--outcomes 5000 (0: latency only)] [--rate 100] [--latency-count 1000] [--connections 32] [--pool 10]
 *     [--warmup 200] [--only crm-relay|graphile-worker] [--max-per-origin N] [--cpu-prof DIR] [--server-log FILE]
 *     [--node-options FLAGS] [--baseline PATH] [--drain-role worker|all] [--via-pgbouncer] [--single 20]
 *
 * Each round, for crm-relay then graphile-worker:
 * 1. Drain: `--outcomes` deliveries queued while no worker runs (crm-relay:
 *    outcomes accepted by a ROLE=api server, one subscription each;
 *    graphile-worker: jobs added in batches), then a fresh worker process
 *    (crm-relay: ROLE=worker, as graphile-worker a worker alone; `--drain-role
 *    all` drains with a replica that also serves the APIs, heap budget and all)
 *    drains them: deliveries/s from the first to the last delivery, CPU per
 *    delivery of the worker process and of the database's backends
 *    (PostgreSQL processes serving this database, /proc), peak RSS, and the
 *    TLS connections the receiver accepted (keep-alive: a few per worker).
 * 2. Latency: `--latency-count` events offered at `--rate` per second to a
 *    running worker: enqueue accepted (crm-relay: the 202 of
 *    `POST /v1/calls/{id}/outcome`; graphile-worker: add_job returned) →
 *    arrival at the receiver, p50/p99, and the CPU each event cost the
 *    process and PostgreSQL (on two cores, what the tail follows); and for
 *    crm-relay the outcome request's own latency, p50/p99.
 * With `--outcomes 0` the drain is left out: latency alone, for short runs;
 * with `--latency-count 0` the latency phase is: the drain alone.
 * Then the medians over rounds and the ratio line. Duplicates (a webhook-id
 * received twice) are counted; expected 0. Both run in their own processes
 * on a fresh schema of DATABASE_URL (dropped at the end), crm-relay with
 * EGRESS_ALLOW_PRIVATE=127.0.0.1/32 and the receiver's CA in
 * NODE_EXTRA_CA_CERTS — otherwise the production egress path.
 * `--node-options FLAGS` runs the crm-relay servers with those Node/V8 flags
 * (NODE_OPTIONS), e.g. `--node-options --max-semi-space-size=16`.
 * `--baseline PATH` (another build's `apps/server/bin/crm-relay.js`) runs
 * crm-relay's drain and latency phases with that build too, every round,
 * alternating which goes first, and prints its figures as `crm-relay
 * baseline` with the ratios of this checkout's to its: two builds compared in
 * one run.
 * HEAP_SEMI_SPACE_MIB and HEAP_GROWTH_PERCENT set in the bench's environment
 * are crm-relay's heap budget, e.g. `HEAP_SEMI_SPACE_MIB=4 npm run bench:...`;
 * MALLOC_ARENA_MAX set there is passed to crm-relay too (glibc's malloc arenas).
 * `--via-pgbouncer` starts a private PgBouncer in transaction mode (Debian's
 * `pgbouncer`, the tests' harness) in front of the same schema and runs
 * crm-relay's drain and latency phases twice every round, connected directly
 * and through the pooler (DATABASE_URL at PgBouncer, DATABASE_SESSION_URL at
 * PostgreSQL for LISTEN), alternating which goes first; the pooled figures
 * are printed as `crm-relay via PgBouncer`, with PgBouncer's own CPU per
 * delivery, and the ratios to direct (issue 41's goal: throughput within
 * 10 %). It leaves graphile-worker out unless `--with-peer` is given.
 * `--single N` (default 20 with `--via-pgbouncer`, else 0) adds a phase to
 * crm-relay's rounds: split roles (a ROLE=api and a ROLE=worker replica),
 * N outcomes sent one at a time, each after the last arrived: the
 * single-delivery latency (202 → receiver), p50 and max.
 */
import { Certificate, PgBouncer } from "@crm-relay/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Config, Console, Duration, Effect, Option, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Argv from "../support/Argv.js"
import { backendCpu, backendCpuSince } from "../support/BackendCpu.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient } from "../support/Http.js"
import { type Arrivals, leadOutcome, percentile, startReceiver } from "../support/Receiver.js"
import { postOutcomes } from "../support/Outcomes.js"
import { transactions } from "../support/PgCounters.js"
import { runMain } from "../support/runMain.js"
import { cpuSeconds, peakRssMiB, serve } from "../support/ServerProcess.js"

const outcomes = Argv.integer("outcomes", 5_000, 0)
const rounds = Argv.integer("rounds", 2)
const connections = Math.max(1, Argv.integer("connections", 32, 0))
const pool = Math.max(1, Argv.integer("pool", 10, 0))
const warmup = Argv.integer("warmup", 200, 0)
/** Events per second offered in the latency phase. */
const rate = Argv.integer("rate", 100)
const latencyCount = Argv.integer("latency-count", 1_000, 0)
if (outcomes === 0 && latencyCount === 0) {
  process.stderr.write("--outcomes 0 leaves out the drain and --latency-count 0 the latency phase: nothing would be measured. Give one of them a count.\n")
  process.exit(2)
}
/** Direct against through a private PgBouncer in transaction mode, in one run. */
const viaPgbouncer = Argv.flag("via-pgbouncer")
/** Outcomes sent one at a time to split roles each round (with --via-pgbouncer: 20 unless given). */
const single = Argv.integer("single", viaPgbouncer ? 20 : 0, 0)
const only = Argv.text("only") ?? (viaPgbouncer && !Argv.flag("with-peer") ? "crm-relay" : undefined)
/** ROLE of the process that drains the backlog: `worker` (as graphile-worker, a worker process alone) or `all`. */
const drainRole = Argv.text("drain-role") ?? "worker"
if (drainRole !== "worker" && drainRole !== "all") {
  process.stderr.write(`--drain-role is worker or all, not ${JSON.stringify(drainRole)}.\n`)
  process.exit(2)
}
/** DELIVERY_MAX_PER_ORIGIN of the crm-relay servers (default: the server's own). */
const maxPerOrigin = Argv.text("max-per-origin")
const serverLog = Argv.text("server-log")
const cpuProfileDir = Argv.text("cpu-prof")
const nodeOptions = Argv.text("node-options")
/** Another build's binary, run beside this checkout's in every round. */
const baseline = Argv.text("baseline")
const PEER = fileURLToPath(new URL("./GraphilePeer.ts", import.meta.url))
const TSX_LOADER = new URL("../../../node_modules/tsx/dist/loader.mjs", import.meta.url).href

/** What every server process of the run shares. */
interface ServerEnv {
  readonly url: Redacted.Redacted
  /** DATABASE_SESSION_URL, when `url` goes through a transaction pooler. */
  readonly sessionUrl?: Redacted.Redacted
  readonly adminToken: string
  readonly masterKey: string
  readonly caFile: string
}

/** How long one of the outcomes sent one at a time may take to arrive (issue 41's figure: 10 of 20 did not in 20 s). */
const SINGLE_BOUND = Duration.seconds(20)

/** Through the pooler: its servers' settings, and PgBouncer's process for its CPU. */
interface Via {
  readonly env: ServerEnv
  readonly pooler: () => number | undefined
}

/** `crm-relay serve` (ROLE `role`) as a child process for the scope, SIGTERMed at its end. */
const startServer = (env: ServerEnv, role: "all" | "api" | "worker", bin?: string) =>
  serve({
    bin,
    databaseUrl: env.url,
    pool,
    adminToken: env.adminToken,
    masterKey: env.masterKey,
    cpuProfileDir,
    nodeOptions,
    stdout: serverLog === undefined ? "ignore" : Fs.openSync(serverLog, "a"),
    logLevel: serverLog === undefined ? "Warning" : "Info",
    env: {
      ROLE: role,
      EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
      NODE_EXTRA_CA_CERTS: env.caFile,
      ...(env.sessionUrl === undefined ? {} : { DATABASE_SESSION_URL: Redacted.value(env.sessionUrl) }),
      ...(maxPerOrigin === undefined ? {} : { DELIVERY_MAX_PER_ORIGIN: maxPerOrigin })
    },
    stopWithin: "20 seconds"
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

/** The backends of the bench's database: both workers' and PostgreSQL's own work for them. */
const thisDatabase = (admin: PgClient.PgClient) => admin`datname = current_database()`

/**
 * Transactions per delivery since `before`, once the drain's worker exited: a backend reports its
 * counts at exit (or about once a second while it runs), so this waits a second for the last ones.
 */
const transactionsSince = (admin: PgClient.PgClient, before: number, deliveries: number) =>
  Effect.zipRight(Effect.sleep("1 second"), Effect.map(transactions(admin), (after) => (after - before) / deliveries))

/** One system's figures of one round. */
interface RoundFigures {
  readonly drainPerSecond: number
  readonly workerCpuMicros: number
  readonly databaseCpuMicros: number
  readonly rssMiB: number
  /**
   * Database transactions per delivery during the drain (pg_stat_database; outside a transaction block
   * each statement is one), counted once the worker exited, as backends report their counts at exit.
   */
  readonly transactionsPerDelivery: number
  /** TLS connections the receiver accepted during the drain (keep-alive: a few, not one per delivery). */
  readonly connections: number
  readonly p50: number
  readonly p99: number
  /**
   * CPU per event of the latency phase (after its warm-up): the process that queues and delivers
   * (crm-relay: intake and delivery; graphile-worker: delivery, its jobs added by the bench) and PostgreSQL.
   * On two cores the p99 follows what every event costs the machine.
   */
  readonly latencyCpuMicros: number
  readonly latencyDatabaseCpuMicros: number
  readonly requestP50?: number
  readonly requestP99?: number
  /** Through a pooler: its process's CPU per delivery during the drain. */
  readonly poolerCpuMicros?: number
  /** `--single` outcomes one at a time: accepted → receiver, p50 and max. */
  readonly singleP50?: number
  readonly singleMax?: number
}

/** The drain's figures when `--outcomes 0` leaves it out. */
const noDrain = {
  drainPerSecond: Number.NaN,
  workerCpuMicros: Number.NaN,
  databaseCpuMicros: Number.NaN,
  deliveries: 0,
  rssMiB: Number.NaN,
  connections: Number.NaN
}

/** The latency phase's figures when `--latency-count 0` leaves it out. */
const noLatency = { p50: Number.NaN, p99: Number.NaN, latencyCpuMicros: Number.NaN, latencyDatabaseCpuMicros: Number.NaN }

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor((sorted.length - 1) / 2)]!
}

const report = (name: string, f: RoundFigures) =>
  Console.log(
    `  ${name}: ${
      Number.isNaN(f.drainPerSecond) ? "" : `drain ${f.drainPerSecond.toFixed(0)} deliveries/s; CPU per delivery worker ${f.workerCpuMicros.toFixed(0)} µs + PostgreSQL ${
        f.databaseCpuMicros.toFixed(0)
      } µs${f.poolerCpuMicros === undefined ? "" : ` + PgBouncer ${f.poolerCpuMicros.toFixed(0)} µs`}; ${f.transactionsPerDelivery.toFixed(2)} database transactions per delivery; peak RSS ${f.rssMiB.toFixed(0)} MiB; ${f.connections.toFixed(0)} TLS connections; `
    }${
      Number.isNaN(f.p50) ? "no latency phase" : `accepted → receiver at ${rate}/s p50 ${f.p50.toFixed(1)} / p99 ${f.p99.toFixed(1)} ms (CPU per event ${
        f.latencyCpuMicros.toFixed(0)
      } µs + PostgreSQL ${f.latencyDatabaseCpuMicros.toFixed(0)} µs)${
        f.requestP50 === undefined ? "" : `; outcome request p50 ${f.requestP50.toFixed(1)} / p99 ${f.requestP99!.toFixed(1)} ms`
      }`
    }${f.singleP50 === undefined ? "" : `; split roles, one at a time (${single}) p50 ${f.singleP50.toFixed(1)} / max ${f.singleMax!.toFixed(1)} ms`}`
  )

/** The graphile-worker process for the scope (SIGTERM at its end), once it printed `ready`. */
const startPeer = (env: Record<string, string>) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        // One process (not tsx's launcher and its child): its CPU and RSS are the peer's.
        ChildProcess.spawn(process.execPath, ["--import", TSX_LOADER, PEER], {
          stdio: ["ignore", "pipe", "inherit"],
          env: { PATH: process.env["PATH"] ?? "", ...env }
        })
      ),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        }).pipe(Effect.timeout("20 seconds"), Effect.ignore)
    )
    yield* Effect.async<void, Error>((resume) => {
      let seen = ""
      child.stdout!.on("data", (chunk: Buffer) => {
        seen += chunk.toString("utf8")
        if (seen.includes("ready")) resume(Effect.void)
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`The graphile-worker peer exited (code ${code}) before it ran.`))))
    })
    return child.pid!
  })

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const admin = yield* PgClient.make({ url: base.value, maxConnections: 1 })
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
  // The same schema through a private PgBouncer in transaction mode: an entry whose server connections set its search_path.
  const via = viaPgbouncer ? yield* Effect.gen(function*() {
    const parsed = new URL(Redacted.value(base.value))
    const entry = `relay_${database.schema}`
    const bouncer = yield* PgBouncer.start({
      host: parsed.hostname,
      port: Number(parsed.port || "5432"),
      user: decodeURIComponent(parsed.username || "postgres"),
      databases: { [entry]: { dbname: decodeURIComponent(parsed.pathname.slice(1)), searchPath: database.schema } },
      // The drain's worker and the latency phase's server, a pool each, never waiting on the pooler for a connection.
      poolSize: 2 * pool
    }).pipe(Effect.orDie)
    return {
      env: { ...env, url: Redacted.make(bouncer.url(entry)), sessionUrl: database.url },
      pooler: bouncer.pid
    } satisfies Via
  }) : undefined
  const call = yield* jsonClient(connections)
  const peerSchema = `gw_${randomBytes(6).toString("hex")}`
  yield* Effect.acquireRelease(
    admin`CREATE SCHEMA ${admin(peerSchema)}`.pipe(Effect.orDie),
    () => admin`DROP SCHEMA IF EXISTS ${admin(peerSchema)} CASCADE`.pipe(Effect.ignore)
  )
  yield* admin.unsafe(`CREATE TABLE "${peerSchema}".attempts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id text NOT NULL, attempt integer NOT NULL, started_at timestamptz NOT NULL, status_code integer,
    duration_ms integer NOT NULL, result text NOT NULL)`).pipe(Effect.orDie)
  const peerEnv = {
    DATABASE_URL: Redacted.value(base.value),
    PEER_SCHEMA: peerSchema,
    PEER_SECRET: `whsec_${randomBytes(24).toString("base64")}`,
    PEER_CA: caFile,
    PEER_CONCURRENCY: "32",
    PEER_POOL: String(pool)
  }
  yield* Console.log(
    `PostgreSQL ${database.version}${via === undefined ? "" : "; direct and through PgBouncer in transaction mode"}; pool ${pool}; crm-relay drains with ROLE=${drainRole}; ${Os.cpus().length} CPUs; load average ${Os.loadavg().map((n) => n.toFixed(2)).join(" ")}`
  )

  // The account: set up through a ROLE=api server that stays up to accept the backlogs.
  const api = yield* startServer(env, "api")
  const account = yield* call("POST", `${api.adminUrl}/v1/accounts`, adminToken, { name: "bench", mode: "live" })
  const accountId = String(account["id"])
  const key = yield* call("POST", `${api.adminUrl}/v1/accounts/${accountId}/keys`, adminToken)
  yield* call("POST", `${api.publicUrl}/subscribe`, String(key["key"]), { targetUrl: receiver.url, event: "lead" })
  const body = JSON.stringify(leadOutcome(accountId))

  /**
   * The latency phase's figures: `offer` queues the live events and waits for their arrival (accepted
   * times by call id); p50/p99 of accepted → receiver, and the CPU each event cost process `pid` and the
   * database's backends over it.
   */
  const latencyOver = <E, R>(pid: number, offer: Effect.Effect<Map<string, number>, E, R>) =>
    Effect.gen(function*() {
      const cpuBefore = yield* cpuSeconds(pid)
      const databaseBefore = yield* backendCpu(admin, thisDatabase(admin))
      const accepted = yield* offer
      const cpu = (yield* cpuSeconds(pid)) - cpuBefore
      const databaseCpu = yield* backendCpuSince(admin, thisDatabase(admin), databaseBefore)
      const { latencies } = measure(receiver.arrivals, accepted)
      return {
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        latencyCpuMicros: (cpu / accepted.size) * 1e6,
        latencyDatabaseCpuMicros: (databaseCpu / accepted.size) * 1e6
      }
    })

  const crmRelayRound = (round: number, bin?: string, via?: Via) =>
    Effect.gen(function*() {
      const tag = via !== undefined ? `p${round}` : bin === undefined ? `r${round}` : `b${round}`
      const serverEnv = via?.env ?? env
      const backlog = yield* postOutcomes(call, api.adminUrl, adminToken, accountId, `${tag}-backlog`, outcomes, { concurrency: connections })
      const transactionsBefore = yield* transactions(admin)
      const drained = outcomes === 0 ? noDrain : yield* Effect.scoped(Effect.gen(function*() {
        const cpuBefore = yield* backendCpu(admin, thisDatabase(admin))
        const connectionsBefore = receiver.arrivals.connections
        const server = yield* startServer(serverEnv, drainRole, bin)
        const poolerPid = via?.pooler()
        const poolerBefore = poolerPid === undefined ? 0 : yield* cpuSeconds(poolerPid)
        const workerBefore = yield* cpuSeconds(server.pid)
        const missing = yield* server.whileRunning(awaitDeliveries(receiver.arrivals, backlog, Duration.minutes(10)))
        const worker = (yield* cpuSeconds(server.pid)) - workerBefore
        const pooler = poolerPid === undefined ? undefined : (yield* cpuSeconds(poolerPid)) - poolerBefore
        const databaseCpu = yield* backendCpuSince(admin, thisDatabase(admin), cpuBefore)
        const { first, last, latencies } = measure(receiver.arrivals, backlog)
        if (missing > 0) yield* Console.log(`  crm-relay: ${missing} of ${outcomes} not delivered after 10 minutes`)
        return {
          drainPerSecond: latencies.length / ((last - first) / 1000),
          workerCpuMicros: (worker / latencies.length) * 1e6,
          databaseCpuMicros: (databaseCpu / latencies.length) * 1e6,
          deliveries: latencies.length,
          rssMiB: yield* peakRssMiB(server.pid),
          connections: receiver.arrivals.connections - connectionsBefore,
          ...(pooler === undefined ? {} : { poolerCpuMicros: (pooler / latencies.length) * 1e6 })
        }
      }))
      // The drain's alone: counted before the latency phase's intake and deliveries add theirs.
      const transactionsPerDelivery = outcomes === 0 ? Number.NaN : yield* transactionsSince(admin, transactionsBefore, drained.deliveries)
      const latency = latencyCount === 0 && single === 0 ? noLatency : yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(serverEnv, "all", bin)
        if (warmup > 0) {
          const warm = yield* postOutcomes(call, server.adminUrl, adminToken, accountId, `${tag}-warmup`, warmup, {
            concurrency: connections,
            perSecond: rate
          })
          yield* server.whileRunning(awaitDeliveries(receiver.arrivals, warm, Duration.seconds(60)))
        }
        if (latencyCount === 0) return noLatency
        const requests: Array<number> = []
        const live = yield* latencyOver(
          server.pid,
          server.whileRunning(Effect.tap(
            postOutcomes(call, server.adminUrl, adminToken, accountId, `${tag}-live`, latencyCount, {
              concurrency: connections,
              perSecond: rate,
              requestMillis: requests
            }),
            (accepted) => awaitDeliveries(receiver.arrivals, accepted, Duration.minutes(5))
          ))
        )
        requests.sort((a, b) => a - b)
        return { ...live, requestP50: percentile(requests, 50), requestP99: percentile(requests, 99) }
      }))
      const alone = single === 0 ? {} : yield* Effect.scoped(Effect.gen(function*() {
        // Split roles, as operators scale out: a ROLE=api replica takes each outcome, a ROLE=worker replica
        // delivers it, woken by the API's NOTIFY on its LISTEN. One at a time, each after the last arrived.
        const [worker, intake] = yield* Effect.all([startServer(serverEnv, "worker", bin), startServer(serverEnv, "api", bin)], {
          concurrency: 2
        })
        const one = (label: string) =>
          Effect.flatMap(
            postOutcomes(call, intake.adminUrl, adminToken, accountId, `${tag}-single-${label}`, 1, { concurrency: 1 }),
            (accepted) => Effect.as(worker.whileRunning(awaitDeliveries(receiver.arrivals, accepted, SINGLE_BOUND)), accepted)
          )
        // The first, uncounted: the worker's LISTEN is in effect once it delivered one.
        yield* one("first")
        const singles: Array<number> = []
        for (let i = 0; i < single; i++) singles.push(...measure(receiver.arrivals, yield* one(String(i))).latencies)
        singles.sort((a, b) => a - b)
        if (singles.length < single) {
          yield* Console.log(`  ${single - singles.length} of ${single} outcomes sent one at a time not delivered within ${Duration.format(SINGLE_BOUND)}`)
        }
        return { singleP50: percentile(singles, 50), singleMax: singles[singles.length - 1] ?? Number.NaN }
      }))
      return { ...drained, transactionsPerDelivery, ...latency, ...alone } satisfies RoundFigures
    })

  const jobPayload = (callId: string) => ({ url: receiver.url, body: body.replace("{", `{"call_id":${JSON.stringify(callId)},`) })

  const graphileRound = (round: number) =>
    Effect.gen(function*() {
      const prefix = `gw-r${round}-backlog`
      // The backlog, added in batches (as a bulk producer would), timestamped as accepted.
      const backlog = new Map<string, number>()
      for (let from = 0; from < outcomes; from += 500) {
        const batch = Array.from({ length: Math.min(500, outcomes - from) }, (_, i) => `${prefix}-${from + i}`)
        yield* admin.unsafe(
          `SELECT "${peerSchema}".add_jobs(ARRAY(SELECT ROW('deliver', p, NULL, NULL, NULL, NULL, NULL, NULL)::"${peerSchema}".job_spec
            FROM json_array_elements($1::json) AS p))`,
          [JSON.stringify(batch.map(jobPayload))]
        ).pipe(Effect.orDie)
        for (const callId of batch) backlog.set(callId, performance.now())
      }
      const transactionsBefore = yield* transactions(admin)
      const drained = outcomes === 0 ? noDrain : yield* Effect.scoped(Effect.gen(function*() {
        const cpuBefore = yield* backendCpu(admin, thisDatabase(admin))
        const connectionsBefore = receiver.arrivals.connections
        const pid = yield* startPeer(peerEnv)
        const workerBefore = yield* cpuSeconds(pid)
        const missing = yield* awaitDeliveries(receiver.arrivals, backlog, Duration.minutes(10))
        const worker = (yield* cpuSeconds(pid)) - workerBefore
        const databaseCpu = yield* backendCpuSince(admin, thisDatabase(admin), cpuBefore)
        const { first, last, latencies } = measure(receiver.arrivals, backlog)
        if (missing > 0) yield* Console.log(`  graphile-worker: ${missing} of ${outcomes} not delivered after 10 minutes`)
        return {
          drainPerSecond: latencies.length / ((last - first) / 1000),
          workerCpuMicros: (worker / latencies.length) * 1e6,
          databaseCpuMicros: (databaseCpu / latencies.length) * 1e6,
          deliveries: latencies.length,
          rssMiB: yield* peakRssMiB(pid),
          connections: receiver.arrivals.connections - connectionsBefore
        }
      }))
      // The drain's alone: counted before the latency phase's intake and deliveries add theirs.
      const transactionsPerDelivery = outcomes === 0 ? Number.NaN : yield* transactionsSince(admin, transactionsBefore, drained.deliveries)
      const latency = latencyCount === 0 ? noLatency : yield* Effect.scoped(Effect.gen(function*() {
        const pid = yield* startPeer(peerEnv)
        const offer = (label: string, count: number) =>
          Effect.gen(function*() {
            const accepted = new Map<string, number>()
            const start = performance.now()
            yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
              Effect.gen(function*() {
                const wait = start + (i * 1000) / rate - performance.now()
                if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
                const callId = `gw-r${round}-${label}-${i}`
                yield* admin.unsafe(`SELECT "${peerSchema}".add_job('deliver', $1::json)`, [JSON.stringify(jobPayload(callId))])
                  .pipe(Effect.orDie)
                accepted.set(callId, performance.now())
              }), { concurrency: connections, discard: true })
            yield* awaitDeliveries(receiver.arrivals, accepted, Duration.minutes(5))
            return accepted
          })
        if (warmup > 0) yield* offer("warmup", warmup)
        return yield* latencyOver(pid, offer("live", latencyCount))
      }))
      return { ...drained, transactionsPerDelivery, ...latency } satisfies RoundFigures
    })

  // The peer's schema (its migrations run when it first starts), before any job is added.
  if (only !== "crm-relay") yield* Effect.scoped(startPeer(peerEnv))

  const crm: Array<RoundFigures> = []
  const other: Array<RoundFigures> = []
  const peer: Array<RoundFigures> = []
  const crmRelay = (round: number) =>
    Effect.gen(function*() {
      crm.push(yield* crmRelayRound(round))
      yield* report("crm-relay", crm[crm.length - 1]!)
    })
  const crmRelayBaseline = (round: number, bin: string) =>
    Effect.gen(function*() {
      other.push(yield* crmRelayRound(round, bin))
      yield* report("crm-relay baseline", other[other.length - 1]!)
    })
  const pooled: Array<RoundFigures> = []
  const crmRelayPooled = (round: number, through: Via) =>
    Effect.gen(function*() {
      pooled.push(yield* crmRelayRound(round, undefined, through))
      yield* report("crm-relay via PgBouncer", pooled[pooled.length - 1]!)
    })
  for (let round = 1; round <= rounds; round++) {
    yield* Console.log(`round ${round} (load average ${Os.loadavg().map((n) => n.toFixed(2)).join(" ")}):`)
    if (only !== "graphile-worker") {
      // The two builds take turns going first, so neither always meets the other's leftovers.
      if (baseline !== undefined && round % 2 === 0) yield* crmRelayBaseline(round, baseline)
      if (via !== undefined && round % 2 === 0) yield* crmRelayPooled(round, via)
      yield* crmRelay(round)
      if (baseline !== undefined && round % 2 === 1) yield* crmRelayBaseline(round, baseline)
      if (via !== undefined && round % 2 === 1) yield* crmRelayPooled(round, via)
    }
    if (only !== "crm-relay") {
      peer.push(yield* graphileRound(round))
      yield* report("graphile-worker", peer[peer.length - 1]!)
    }
  }
  const summary = (figures: ReadonlyArray<RoundFigures>): RoundFigures => ({
    drainPerSecond: median(figures.map((f) => f.drainPerSecond)),
    workerCpuMicros: median(figures.map((f) => f.workerCpuMicros)),
    databaseCpuMicros: median(figures.map((f) => f.databaseCpuMicros)),
    rssMiB: median(figures.map((f) => f.rssMiB)),
    connections: median(figures.map((f) => f.connections)),
    transactionsPerDelivery: median(figures.map((f) => f.transactionsPerDelivery)),
    p50: median(figures.map((f) => f.p50)),
    p99: median(figures.map((f) => f.p99)),
    latencyCpuMicros: median(figures.map((f) => f.latencyCpuMicros)),
    latencyDatabaseCpuMicros: median(figures.map((f) => f.latencyDatabaseCpuMicros)),
    ...(figures[0]?.requestP50 === undefined ? {} : {
      requestP50: median(figures.map((f) => f.requestP50!)),
      requestP99: median(figures.map((f) => f.requestP99!))
    }),
    ...(figures[0]?.poolerCpuMicros === undefined ? {} : { poolerCpuMicros: median(figures.map((f) => f.poolerCpuMicros!)) }),
    ...(figures[0]?.singleP50 === undefined ? {} : {
      singleP50: median(figures.map((f) => f.singleP50!)),
      singleMax: median(figures.map((f) => f.singleMax!))
    })
  })
  yield* Console.log(`medians over ${rounds} round${rounds === 1 ? "" : "s"} (load average ${Os.loadavg().map((n) => n.toFixed(2)).join(" ")}):`)
  if (crm.length > 0) yield* report("crm-relay", summary(crm))
  if (other.length > 0) {
    yield* report("crm-relay baseline", summary(other))
    const [now, then] = [summary(crm), summary(other)]
    yield* Console.log(
      `crm-relay / baseline: drain ${(now.drainPerSecond / then.drainPerSecond).toFixed(2)}×, CPU per delivery worker ${
        (now.workerCpuMicros / then.workerCpuMicros).toFixed(2)
      }× + PostgreSQL ${(now.databaseCpuMicros / then.databaseCpuMicros).toFixed(2)}×, peak RSS ${(now.rssMiB / then.rssMiB).toFixed(2)}×`
    )
  }
  if (pooled.length > 0) {
    yield* report("crm-relay via PgBouncer", summary(pooled))
    const [direct, through] = [summary(crm), summary(pooled)]
    const cpu = (f: RoundFigures) => f.workerCpuMicros + f.databaseCpuMicros + (f.poolerCpuMicros ?? 0)
    yield* Console.log(
      `via PgBouncer / direct: drain ${(through.drainPerSecond / direct.drainPerSecond).toFixed(2)}× (goal ≥ 0.90), CPU per delivery ${
        (cpu(through) / cpu(direct)).toFixed(2)
      }× (worker + PostgreSQL + PgBouncer)${Number.isNaN(direct.p50) ? "" : `, latency at ${rate}/s p50 ${(through.p50 / direct.p50).toFixed(2)}×`}${
        through.singleP50 === undefined ? "" : `, one at a time p50 ${(through.singleP50 / direct.singleP50!).toFixed(2)}× (goal ≤ 3× or ≤ 100 ms)`
      }`
    )
  }
  if (peer.length > 0) yield* report("graphile-worker", summary(peer))
  if (crm.length > 0 && peer.length > 0 && outcomes > 0) {
    const ratio = summary(crm).drainPerSecond / summary(peer).drainPerSecond
    yield* Console.log(`ratio: crm-relay drains ${ratio.toFixed(2)}× graphile-worker's deliveries/s (issue 43's goal: ≥ 2)`)
  }
  yield* Console.log(`duplicates (a webhook-id received twice): ${receiver.arrivals.duplicates}`)
})
void runMain(main)
