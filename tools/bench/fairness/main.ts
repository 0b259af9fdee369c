/**
 * Fair queues, as an operator would see them: one `crm-relay serve`
 * (ROLE all) on real PostgreSQL; account B's receiver is healthy, account
 * A's accepts the connection, reads the request and never answers.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_queue npm run bench:fairness -- \
 *     [--rounds 2] [--events 50] [--rate 5] [--backlog 300] [--max-per-origin N]
 *
 * In alternating rounds: B alone (`--events` outcomes at `--rate` per
 * second, outcome accepted → delivery arrived at B's receiver), then the
 * same behind A's silent receiver with `--backlog` A events queued first.
 * Prints p50/p99 of both, the most requests A's receiver held open at once
 * (the delivery slots it took; the worker has 128), and the ratio of B's p99
 * behind A over alone. Goal: p99 behind ≤ max(1 s, 3 × alone), and A holding
 * at most a quarter of the slots.
 */
import { Certificate } from "@crm-relay/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Config, Console, Duration, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Https from "node:https"
import type { AddressInfo, Socket } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { type JsonRequest, jsonClient } from "../support/Http.js"
import { runMain } from "../support/runMain.js"
import { serve } from "../support/ServerProcess.js"

const rounds = Argv.integer("rounds", 2)
const events = Argv.integer("events", 50)
const rate = Argv.integer("rate", 5)
const backlog = Argv.integer("backlog", 300)
const maxPerOrigin = Argv.text("max-per-origin")

/** A loopback HTTPS receiver: `answer` false = read the request, never answer. */
const startReceiver = (tls: Certificate.TlsMaterial, answer: boolean) =>
  Effect.gen(function*() {
    const arrivals = new Map<string, number>()
    const sockets = new Set<Socket>()
    const state = { open: 0, mostOpen: 0 }
    const server = Https.createServer({ cert: tls.cert, key: tls.key, keepAliveTimeout: 60_000 }, (request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const callId = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { call_id: string }).call_id
        if (!arrivals.has(callId)) arrivals.set(callId, performance.now())
        if (answer) {
          response.writeHead(200, { "content-type": "application/json" })
          response.end("{}")
          return
        }
        state.open++
        state.mostOpen = Math.max(state.mostOpen, state.open)
        response.on("close", () => state.open--)
      })
    })
    server.on("secureConnection", (socket: Socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          for (const socket of sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    return {
      arrivals,
      state,
      /** Drops every open request (between rounds). */
      hangUp: Effect.sync(() => {
        for (const socket of sockets) socket.destroy()
      }),
      url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/fairness`
    }
  })

const outcome = (accountId: string) => ({
  account_id: accountId,
  tenant_id: "fairness-tenant",
  classification: "lead",
  source: "Fairness (phone)",
  tags: [],
  caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+1 555 0100"], emails: [], address: "1 Analytical Way", postal_code: "02139" },
  lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "high" }
})

/** Posts `count` outcomes at `perSecond` (call ids `${prefix}-i`); returns each call's 202 time. */
const offer = (call: JsonRequest, adminUrl: string, token: string, accountId: string, prefix: string, count: number, perSecond: number) =>
  Effect.gen(function*() {
    const accepted = new Map<string, number>()
    const body = outcome(accountId)
    const start = performance.now()
    yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
      Effect.gen(function*() {
        if (perSecond > 0) {
          const wait = start + (i * 1000) / perSecond - performance.now()
          if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        }
        const callId = `${prefix}-${i}`
        yield* call("POST", `${adminUrl}/v1/calls/${callId}/outcome`, token, body)
        accepted.set(callId, performance.now())
      }), { concurrency: 16, discard: true })
    return accepted
  })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN
}

const main = Effect.gen(function*() {
  const base = yield* Config.option(Config.redacted("DATABASE_URL"))
  if (Option.isNone(base)) return yield* Console.error("Set DATABASE_URL to a PostgreSQL database: this benchmark runs on real PostgreSQL.")
  const database = yield* freshSchema(base.value)
  const tls = yield* Effect.orDie(Certificate.generateTlsMaterial())
  const runDir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-fairness-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const caFile = Path.join(runDir, "receiver-ca.pem")
  Fs.writeFileSync(caFile, tls.ca)
  const healthy = yield* startReceiver(tls, true)
  const silent = yield* startReceiver(tls, false)
  const adminToken = randomBytes(24).toString("hex")
  const server = yield* serve({
    databaseUrl: database.url,
    pool: 10,
    adminToken,
    masterKey: randomBytes(32).toString("base64"),
    cpuProfileDir: undefined,
    stdout: "ignore",
    logLevel: "Error",
    env: {
      ROLE: "all",
      EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
      NODE_EXTRA_CA_CERTS: caFile,
      ...(maxPerOrigin === undefined ? {} : { DELIVERY_MAX_PER_ORIGIN: maxPerOrigin })
    },
    stopWithin: "20 seconds"
  })
  const call = yield* jsonClient(32)
  const sql = yield* PgClient.make({ url: database.url, maxConnections: 1 })
  const account = (name: string, targetUrl: string) =>
    Effect.gen(function*() {
      const created = yield* call("POST", `${server.adminUrl}/v1/accounts`, adminToken, { name, mode: "live" })
      const id = String(created["id"])
      const key = yield* call("POST", `${server.adminUrl}/v1/accounts/${id}/keys`, adminToken)
      yield* call("POST", `${server.publicUrl}/subscribe`, String(key["key"]), { targetUrl, event: "lead" })
      return id
    })
  const a = yield* account("A (silent receiver)", silent.url)
  const b = yield* account("B (healthy receiver)", healthy.url)
  yield* Console.log(`PostgreSQL ${database.version}; one ROLE=all server, 128 delivery slots; load average ${Os.loadavg().map((n) => n.toFixed(2)).join(" ")}`)

  const measureB = (label: string) =>
    Effect.gen(function*() {
      const accepted = yield* offer(call, server.adminUrl, adminToken, b, label, events, rate)
      const deadline = performance.now() + 300_000
      while ([...accepted.keys()].some((id) => !healthy.arrivals.has(id)) && performance.now() < deadline) {
        yield* Effect.sleep("20 millis")
      }
      const latencies = [...accepted].flatMap(([id, at]) => {
        const arrived = healthy.arrivals.get(id)
        return arrived === undefined ? [] : [arrived - at]
      }).sort((x, y) => x - y)
      return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), delivered: latencies.length }
    })

  yield* measureB("warmup")
  const alone: Array<number> = []
  const behind: Array<number> = []
  const held: Array<number> = []
  for (let round = 1; round <= rounds; round++) {
    const load = Os.loadavg().map((n) => n.toFixed(2)).join(" ")
    const solo = yield* measureB(`r${round}-alone`)
    alone.push(solo.p99)
    yield* Console.log(`round ${round} (load ${load}): B alone: p50 ${solo.p50.toFixed(1)} ms, p99 ${solo.p99.toFixed(1)} ms (${solo.delivered}/${events})`)
    silent.state.mostOpen = 0
    yield* offer(call, server.adminUrl, adminToken, a, `r${round}-silent`, backlog, 0)
    // A's slots fill before B's events come.
    while (silent.state.open === 0) yield* Effect.sleep("20 millis")
    const crowded = yield* measureB(`r${round}-behind`)
    behind.push(crowded.p99)
    held.push(silent.state.mostOpen)
    yield* Console.log(
      `round ${round}: B behind A's silent receiver (${backlog} A events queued): p50 ${crowded.p50.toFixed(1)} ms, p99 ${crowded.p99.toFixed(1)} ms (${crowded.delivered}/${events}); A held ${silent.state.mostOpen} of 128 slots at most`
    )
    // End A's backlog before the next round (its running attempts fail and are not stored).
    yield* sql`UPDATE deliveries SET status = 'failed' WHERE account_id = ${a} AND status = 'pending'`.pipe(Effect.orDie)
    yield* silent.hangUp
    yield* Effect.sleep("1 second")
  }
  const aloneP99 = median(alone)
  const behindP99 = median(behind)
  const goal = Math.max(1000, 3 * aloneP99)
  yield* Console.log(`medians: B alone p99 ${aloneP99.toFixed(1)} ms; behind p99 ${behindP99.toFixed(1)} ms; A held at most ${Math.max(...held)} of 128 slots`)
  yield* Console.log(
    `ratio: behind / alone p99 ${(behindP99 / aloneP99).toFixed(2)}; goal p99 behind ≤ max(1 s, 3 × alone) = ${goal.toFixed(0)} ms: ${
      behindP99 <= goal ? "met" : "NOT met"
    }; silent receiver ≤ 32 slots (a quarter): ${Math.max(...held) <= 32 ? "met" : "NOT met"}`
  )
})
void runMain(main)
