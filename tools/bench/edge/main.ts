/**
 * The public port under attack while the main job runs: call intake (outcome
 * accepted on the internal port) and webhook delivery (accepted → arrival at
 * the receiver) measured alone and while the public port takes each attack,
 * in alternating rounds on one server (`crm-relay serve`, ROLE all, on real
 * PostgreSQL, under a lowered open-file limit), all on loopback.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:edge -- \
 *     [--rounds 1] [--seconds 15] [--rate 20] [--nofile 2048] [--slow 3000] [--idle 1000] \
 *     [--flood 3000] [--bad-key-connections 256] [--bad-key-rate 2000] [--attacks slow,idle,flood,bad-keys] \
 *     [--attacker-nice 0] [--public-process] [--server-log FILE] [--cpu-profile DIR]
 *
 * `--public-process` sends the attacks to a second server (ROLE api) over the
 * same database instead: the public port in its own process.
 *
 * Each round posts `--rate` outcomes a second for `--seconds` seconds (one
 * subscription each, so one delivery each). The attacks:
 * - slow headers: `--slow` connections sending one header byte every 5 s;
 * - idle sockets: `--idle` connections that never send a byte;
 * - connection flood: `--flood` silent connections, past the server's
 *   open-file limit (`--nofile`) and so past its connection budget;
 * - failed-key flood: `--bad-key-connections` keep-alive connections sending
 *   well-formed requests with random keys of the tagged form and a wrong
 *   tag (never a query: see KeyTags), `--bad-key-rate` a second
 *   in all (0: as fast as they are answered), sent at the same CPU priority
 *   as the server (`--attacker-nice 19`: the lowest, standing in for clients
 *   on other machines).
 * Printed per attack: intake and delivery p50/p99 alone and attacked, the
 * ratio lines against the goal p99 ≤ max(100 ms, 3 × alone), the attack's
 * connections still open 15 s after it started (and 15 s after their own connect), the server's refusal
 * counters (GET /metrics). Figures depend on the machine's load: the load
 * average is printed at the start and the end.
 */
import { Certificate } from "@crm-relay/testing"
import { Config, Console, Duration, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient, type JsonRequest } from "../support/Http.js"
import { type Arrivals, leadOutcome, percentile, startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { cpuSeconds, serve } from "../support/ServerProcess.js"

const rounds = Argv.integer("rounds", 1)
const seconds = Argv.integer("seconds", 15)
const rate = Argv.integer("rate", 20)
const nofile = Argv.integer("nofile", 2048, 64)
const slowCount = Argv.integer("slow", 3000, 0)
const idleCount = Argv.integer("idle", 1000, 0)
const floodCount = Argv.integer("flood", 3000, 0)
const badKeyConnections = Argv.integer("bad-key-connections", 256)
const badKeyRate = Argv.integer("bad-key-rate", 2000, 0)
const serverLog = Argv.text("server-log")
/** The request flood's CPU priority (nice value, 0–19): by default the server's own. */
const attackerNice = Math.min(19, Argv.integer("attacker-nice", 0, 0))
/** Where the attacked server writes its CPU profile (V8 `.cpuprofile`) when it stops. */
const cpuProfileDir = Argv.text("cpu-profile")
/** Attack a second server process (ROLE api, same database) instead of the one taking intake and delivering. */
const publicProcess = Argv.flag("public-process")
/** Which attacks to run (comma-separated names: slow, idle, flood, bad-keys). */
const only = new Set((Argv.text("attacks") ?? "slow,idle,flood,bad-keys").split(",").map((name) => name.trim()))

/** An attack under way in its own process (so its sockets never share the measuring client's event loop). */
interface Attack {
  /** Its connections still open 15 s after it began. */
  readonly openAt15: Promise<number>
  /** Ends it; what it did. */
  readonly stop: () => Promise<string>
}

const ATTACKER = fileURLToPath(new URL("./attacker.ts", import.meta.url))

/** Starts the attacker process with `args` (see attacker.ts). */
const startAttacker = (...args: ReadonlyArray<string | number>): Attack => {
  const child = ChildProcess.fork(ATTACKER, args.map(String), { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] })
  // The request flood shares the machine's cores with the server at the same priority unless told otherwise.
  if (child.pid !== undefined && args[0] === "bad-keys" && attackerNice > 0) Os.setPriority(child.pid, attackerNice)
  const messages: Array<Record<string, unknown>> = []
  const waiting: Array<() => void> = []
  child.on("message", (message) => {
    messages.push(message as Record<string, unknown>)
    waiting.splice(0).forEach((wake) => wake())
  })
  const next = async (key: string): Promise<unknown> => {
    for (;;) {
      const found = messages.find((message) => key in message)
      if (found !== undefined) return found[key]
      await new Promise<void>((wake) => waiting.push(wake))
    }
  }
  return {
    openAt15: next("openAt15").then(Number),
    stop: async () => {
      child.send({ stop: true })
      const described = String(await next("described"))
      await new Promise((exited) => child.once("exit", exited))
      return described
    }
  }
}

/** Latencies of one round. */
interface Round {
  readonly intake: Array<number>
  readonly delivery: Array<number>
  readonly missing: number
}

/** `rate` outcomes a second for `seconds` seconds; each one's intake time, then its delivery latency once all arrived (or 60 s passed). */
const measuredLoad = (call: JsonRequest, adminUrl: string, adminToken: string, accountId: string, arrivals: Arrivals, prefix: string) =>
  Effect.gen(function*() {
    const accepted = new Map<string, number>()
    const intake: Array<number> = []
    const count = rate * seconds
    const body = leadOutcome(accountId)
    const start = performance.now()
    yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
      Effect.gen(function*() {
        const wait = start + (i * 1000) / rate - performance.now()
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        const callId = `${prefix}-${i}`
        const sent = performance.now()
        yield* call("POST", `${adminUrl}/v1/calls/${callId}/outcome`, adminToken, body)
        const at = performance.now()
        intake.push(at - sent)
        accepted.set(callId, at)
      }), { concurrency: 64, discard: true })
    const deadline = performance.now() + 60_000
    const missing = () => [...accepted.keys()].filter((id) => !arrivals.byCall.has(id)).length
    while (missing() > 0 && performance.now() < deadline) yield* Effect.sleep("50 millis")
    const delivery = [...accepted].flatMap(([id, at]) => {
      const arrived = arrivals.byCall.get(id)
      return arrived === undefined ? [] : [arrived - at]
    })
    return { intake: intake.sort((a, b) => a - b), delivery: delivery.sort((a, b) => a - b), missing: missing() } satisfies Round
  })

const COUNTERS = [
  "crm_relay_public_connections_refused_total",
  "crm_relay_public_timeouts_total{phase=\"head\"}",
  "crm_relay_public_timeouts_total{phase=\"request\"}",
  "crm_relay_failed_key_refusals_total",
  // Gauges over the time since the previous scrape (the round): how busy and how late the server's event loop was.
  "crm_relay_process_event_loop_utilization",
  "crm_relay_process_event_loop_lag_p99_seconds"
] as const

/** The refusal counters of the server's GET /metrics. */
const scrapeCounters = (adminUrl: string, adminToken: string) =>
  Effect.promise(async () => {
    const text = await (await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })).text()
    return COUNTERS.map((name) => Number(text.split("\n").find((line) => line.startsWith(`${name} `))?.split(" ").pop() ?? 0))
  })

const ms = (value: number) => `${value.toFixed(1)} ms`
const summary = (sorted: ReadonlyArray<number>) => `p50 ${ms(percentile(sorted, 50))}, p99 ${ms(percentile(sorted, 99))}`
const load = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const tls = yield* Effect.orDie(Certificate.generateTlsMaterial())
  const runDir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-edge-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const caFile = Path.join(runDir, "receiver-ca.pem")
  Fs.writeFileSync(caFile, tls.ca)
  const logFile = serverLog ?? Path.join(runDir, "server.log")
  const receiver = yield* startReceiver(tls)
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  const startServer = (role: "all" | "api") =>
    serve({
      databaseUrl: database.url,
      pool: 10,
      adminToken,
      masterKey,
      cpuProfileDir: role === (publicProcess ? "api" : "all") ? cpuProfileDir : undefined,
      stdout: Fs.openSync(logFile, "a"),
      logLevel: "Info",
      env: { ROLE: role, EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile },
      stopWithin: "20 seconds",
      openFileLimit: nofile
    })
  const server = yield* startServer("all")
  // With --public-process the attacks go to a second process (ROLE api) over the same database.
  const attacked = publicProcess ? yield* startServer("api") : server
  const limits = Fs.readFileSync(logFile, "utf8").split("\n").find((line) => line.includes("public port limits")) ?? "{}"
  const budget = (JSON.parse(limits) as { max_connections?: number }).max_connections ?? "?"
  const call = yield* jsonClient(64)
  const account = yield* call("POST", `${server.adminUrl}/v1/accounts`, adminToken, { name: "bench", mode: "live" })
  const accountId = String(account["id"])
  const key = yield* call("POST", `${server.adminUrl}/v1/accounts/${accountId}/keys`, adminToken)
  yield* call("POST", `${server.publicUrl}/subscribe`, String(key["key"]), { targetUrl: receiver.url, event: "lead" })
  const publicPort = Number(new URL(attacked.publicUrl).port)

  yield* Console.log(
    `PostgreSQL ${database.version}; ${Os.cpus().length} CPUs; load average ${load()}; server open-file limit ${nofile}, ` +
      `public connection budget ${budget}; failed-key flood at nice ${attackerNice}; ${publicProcess ? "attacks on a separate ROLE=api process; " : "one process (ROLE all) takes intake, deliveries and the attacks; "}${rate} outcomes/s for ${seconds} s per round; ${rounds} round(s) of each attack`
  )
  yield* measuredLoad(call, server.adminUrl, adminToken, accountId, receiver.arrivals, "warmup")

  const attacks: ReadonlyArray<{ readonly id: string; readonly name: string; readonly start: () => Attack }> = ([
    { id: "slow", name: `slow headers (${slowCount} connections, one header byte every 5 s)`, start: () => startAttacker("slow", publicPort, slowCount) },
    { id: "idle", name: `idle sockets (${idleCount} connections that never send a byte)`, start: () => startAttacker("idle", publicPort, idleCount) },
    {
      id: "flood",
      name: `connection flood (${floodCount} silent connections; open-file limit ${nofile}, budget ${budget})`,
      start: () => startAttacker("idle", publicPort, floodCount)
    },
    {
      id: "bad-keys",
      name: `failed-key flood (${badKeyConnections} connections, random keys with a wrong tag, ${badKeyRate > 0 ? `at most ${badKeyRate}/s` : "uncapped"})`,
      start: () => startAttacker("bad-keys", attacked.publicUrl, badKeyConnections, badKeyRate)
    }
  ] as const).filter((attack) => only.has(attack.id))
  const alone: Array<Round> = []
  const underAttack = attacks.map(() => [] as Array<Round>)
  const notes = attacks.map(() => [] as Array<string>)
  let n = 0
  for (let round = 0; round < rounds; round++) {
    for (const [index, attack] of attacks.entries()) {
      const quiet = yield* measuredLoad(call, server.adminUrl, adminToken, accountId, receiver.arrivals, `alone-${n++}`)
      alone.push(quiet)
      yield* Console.log(`alone:    intake ${summary(quiet.intake)}; delivery ${summary(quiet.delivery)}${quiet.missing > 0 ? `; ${quiet.missing} not delivered` : ""}`)
      const before = yield* scrapeCounters(attacked.adminUrl, adminToken)
      const cpuBefore = yield* cpuSeconds(attacked.pid)
      const started = performance.now()
      const running = attack.start()
      yield* Effect.sleep("1 second")
      const hit = yield* measuredLoad(call, server.adminUrl, adminToken, accountId, receiver.arrivals, `attacked-${n++}`)
      const openAt15 = yield* Effect.promise(() => running.openAt15)
      const described = yield* Effect.promise(() => running.stop())
      const cpu = (yield* cpuSeconds(attacked.pid)) - cpuBefore
      const after = yield* scrapeCounters(attacked.adminUrl, adminToken)
      const [refused, headTimeouts, requestTimeouts, failedKeys] = after.map((value, i) => value - before[i]!)
      const [, , , , utilization = 0, lagP99 = 0] = after
      underAttack[index]!.push(hit)
      const note = `open after 15 s: ${openAt15}; ${described}; server: ${refused} connections refused, ${headTimeouts} head and ${requestTimeouts} request timeouts, ${failedKeys} failed-key 429s; server CPU ${cpu.toFixed(1)} s in ${((performance.now() - started) / 1000).toFixed(0)} s, ` +
        `event loop ${(utilization * 100).toFixed(0)} % busy, lag p99 ${ms(lagP99 * 1000)}`
      notes[index]!.push(note)
      yield* Console.log(`attacked: intake ${summary(hit.intake)}; delivery ${summary(hit.delivery)}${hit.missing > 0 ? `; ${hit.missing} not delivered` : ""} — ${attack.name}`)
      yield* Console.log(`          ${note}`)
    }
  }

  const pooled = (rs: ReadonlyArray<Round>, pick: (r: Round) => ReadonlyArray<number>) => rs.flatMap(pick).sort((a, b) => a - b)
  const aloneIntake = pooled(alone, (r) => r.intake)
  const aloneDelivery = pooled(alone, (r) => r.delivery)
  yield* Console.log(`\nsummary (alone: all ${alone.length} unattacked rounds pooled; load average now ${load()})`)
  yield* Console.log(`alone: intake ${summary(aloneIntake)}; outcome → receiver ${summary(aloneDelivery)}`)
  for (const [index, attack] of attacks.entries()) {
    const intake = pooled(underAttack[index]!, (r) => r.intake)
    const delivery = pooled(underAttack[index]!, (r) => r.delivery)
    const lost = underAttack[index]!.reduce((sum, r) => sum + r.missing, 0)
    yield* Console.log(`${attack.name}:`)
    for (const [label, hit, quiet] of [["intake", intake, aloneIntake], ["outcome → receiver", delivery, aloneDelivery]] as const) {
      const p99 = percentile(hit, 99)
      const baseline = percentile(quiet, 99)
      const goal = Math.max(100, 3 * baseline)
      yield* Console.log(
        `  ${label}: ${summary(hit)} (alone ${summary(quiet)}); p99 ratio ${(p99 / baseline).toFixed(2)}; ` +
          `goal p99 ≤ ${ms(goal)}: ${p99 <= goal ? "met" : "NOT met"}`
      )
    }
    if (lost > 0) yield* Console.log(`  ${lost} outcome(s) not delivered within 60 s`)
    for (const note of notes[index]!) yield* Console.log(`  ${note}`)
  }
  yield* Console.log(`duplicates (a webhook-id received twice): ${receiver.arrivals.duplicates}`)
})
void runMain(main)
