/**
 * Fair queues, as an operator would see them: one `crm-relay serve`
 * (ROLE all) on real PostgreSQL, three neighbours measured in turn.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_queue npm run bench:fairness -- \
 *     [--rounds 2] [--events 50] [--rate 5] [--backlog 300] [--push-backlog 300] \
 *     [--max-per-origin N] [--max-per-bridge N]
 *
 * Webhook deliveries: account B's receiver is healthy, account A's accepts
 * the connection, reads the request and never answers. In alternating
 * rounds: B alone (`--events` outcomes at `--rate` per second, outcome
 * accepted → delivery arrived at B's receiver), then the same behind A's
 * silent receiver with `--backlog` A events queued first.
 *
 * CRM pushes: account D's bridge (the reference bridge, in process) is
 * healthy; account C's bridge answers the capabilities check (so the
 * connection can be stored) and then accepts every push request and never
 * answers. In alternating rounds: D alone (outcome accepted → push job
 * succeeded), then the same behind C's silent bridge with `--push-backlog`
 * C push jobs queued first.
 *
 * A silent broker: account E's RabbitMQ destination (created through a
 * listener that forwards to a private RabbitMQ for the creation check, then
 * goes silent: accepts TCP, never answers). In alternating rounds: B alone,
 * then the same behind `--backlog` E events queued first, each waiting out
 * the publisher's connect timeout. The slots E holds are its deliveries
 * leased at once (read from the database every 50 ms).
 *
 * For each queue: p50/p99 of both, the server's CPU per healthy outcome
 * (behind: with the silent backlog's work), the most requests the silent
 * target held open at once (the slots it took: 128 delivery slots, 10 push
 * slots), and the ratio of the healthy p99 behind over alone (medians over
 * the rounds). Goal: p99 behind ≤
 * max(1 s, 3 × alone), and the silent target holding at most a quarter of
 * the slots.
 */
import * as Examples from "@crm-relay/contract/Examples"
import { Operations } from "@crm-relay/contract"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { type Certificate, RabbitMqServer, SilentListener } from "@crm-relay/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Console, Duration, Effect } from "effect"
import * as amqp from "amqplib"
import { randomBytes } from "node:crypto"
import type * as Http from "node:http"
import * as Argv from "../support/Argv.js"
import { type JsonRequest, jsonClient } from "../support/Http.js"
import { listen, readBody } from "../support/HttpsListener.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { leadOutcome, percentile } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { cpuSeconds, serve } from "../support/ServerProcess.js"

const rounds = Argv.integer("rounds", 2)
const events = Argv.integer("events", 50)
const rate = Argv.integer("rate", 5)
const backlog = Argv.integer("backlog", 300)
const pushBacklog = Argv.integer("push-backlog", 300)
const maxPerOrigin = Argv.text("max-per-origin")
const maxPerBridge = Argv.text("max-per-bridge")

/** The workers' slots per replica (DeliveryWorker, CRM push worker). */
const DELIVERY_SLOTS = 128
const PUSH_SLOTS = 10

const HEALTHY_TENANT = "fairness-healthy"
const SILENT_TENANT = "fairness-silent"
const HEALTHY_KEY = randomBytes(16).toString("hex")

/** Requests a silent target holds open now, and the most it held at once. */
interface Held {
  open: number
  most: number
}

/** Reads the request and never answers: the connection stays open until the bench hangs up. */
const holdOpen = (held: Held, response: Http.ServerResponse) => {
  held.open++
  held.most = Math.max(held.most, held.open)
  response.on("close", () => held.open--)
}

/** A webhook receiver: `answer` false = read the request, never answer. */
const startReceiver = (tls: Certificate.TlsMaterial, answer: boolean) =>
  Effect.gen(function*() {
    const arrivals = new Map<string, number>()
    const held: Held = { open: 0, most: 0 }
    const listener = yield* listen(tls, (request, response) =>
      readBody(request, (body) => {
        const callId = (JSON.parse(body) as { call_id: string }).call_id
        if (!arrivals.has(callId)) arrivals.set(callId, performance.now())
        if (!answer) return holdOpen(held, response)
        response.writeHead(200, { "content-type": "application/json" })
        response.end("{}")
      }))
    return { arrivals, held, hangUp: listener.hangUp, url: `https://127.0.0.1:${listener.port}/hooks/fairness` }
  })

/** A bridge that passes the capabilities check (so its connection can be stored), then never answers a push request. */
const startSilentBridge = (tls: Certificate.TlsMaterial) =>
  Effect.gen(function*() {
    const held: Held = { open: 0, most: 0 }
    const capabilities = JSON.stringify(Examples.capabilitiesResponse)
    const listener = yield* listen(tls, (request, response) =>
      readBody(request, () => {
        if (!(request.url ?? "").endsWith(Operations.REST_PATHS.capabilities)) return holdOpen(held, response)
        response.writeHead(200, { "content-type": "application/json" })
        response.end(capabilities)
      }))
    return { held, hangUp: listener.hangUp, url: `https://127.0.0.1:${listener.port}/crm` }
  })

/** Posts `count` outcomes (`body`) at `perSecond` (call ids `${prefix}-i`); returns each call's 202 time. */
const offer = (
  call: JsonRequest,
  adminUrl: string,
  token: string,
  body: Record<string, unknown>,
  prefix: string,
  count: number,
  perSecond: number
) =>
  Effect.gen(function*() {
    const accepted = new Map<string, number>()
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

/** p50, p99 and how many arrived, from accepted and done times per call. */
const latencies = (accepted: ReadonlyMap<string, number>, done: ReadonlyMap<string, number>) => {
  const sorted = [...accepted].flatMap(([id, at]) => {
    const end = done.get(id)
    return end === undefined ? [] : [end - at]
  }).sort((x, y) => x - y)
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), done: sorted.length }
}

/** The median (of an even count, the mean of the middle two: with two rounds, neither round alone). */
const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length / 2
  return sorted.length === 0
    ? Number.NaN
    : sorted.length % 2 === 1
    ? sorted[Math.floor(middle)]!
    : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Waits until `done` has every accepted call (five minutes at most). */
const awaitAll = (accepted: ReadonlyMap<string, number>, done: () => Effect.Effect<ReadonlyMap<string, number>>) =>
  Effect.gen(function*() {
    const deadline = performance.now() + 300_000
    let seen = yield* done()
    while ([...accepted.keys()].some((id) => !seen.has(id)) && performance.now() < deadline) {
      yield* Effect.sleep("20 millis")
      seen = yield* done()
    }
    return latencies(accepted, seen)
  })

/** One queue's alternating rounds: the healthy account alone, then behind the silent target's backlog. */
interface Queue {
  readonly name: string
  readonly unit: string
  readonly slots: number
  readonly held: Held
  /** Offers the healthy account's `events` and measures until each is done. */
  readonly measure: (label: string) => Effect.Effect<{ readonly p50: number; readonly p99: number; readonly done: number }, unknown>
  /** Queues the silent account's backlog for `round`. */
  readonly fill: (round: number) => Effect.Effect<unknown, unknown>
  /** Ends the silent backlog and drops its open requests. */
  readonly drain: Effect.Effect<unknown, unknown>
  readonly backlog: number
  /** The server's CPU seconds so far. */
  readonly cpu: Effect.Effect<number>
}

const alternate = (queue: Queue) =>
  Effect.gen(function*() {
    yield* Console.log(`— ${queue.name} (${queue.slots} slots a replica) —`)
    yield* queue.measure("warmup")
    // Server CPU per healthy outcome over a measurement (behind: the silent backlog's work included).
    const measured = (label: string) =>
      Effect.gen(function*() {
        const before = yield* queue.cpu
        const result = yield* queue.measure(label)
        return { ...result, cpuMs: ((yield* queue.cpu) - before) * 1000 / events }
      })
    const alone: Array<number> = []
    const behind: Array<number> = []
    const held: Array<number> = []
    for (let round = 1; round <= rounds; round++) {
      const load = LoopbackRun.loadAverage()
      const solo = yield* measured(`r${round}-alone`)
      alone.push(solo.p99)
      yield* Console.log(`round ${round} (load ${load}): healthy alone: p50 ${solo.p50.toFixed(1)} ms, p99 ${solo.p99.toFixed(1)} ms (${solo.done}/${events}); server CPU ${solo.cpuMs.toFixed(1)} ms per outcome`)
      queue.held.most = 0
      yield* queue.fill(round)
      // The silent target's slots fill before the healthy account's work comes.
      while (queue.held.open === 0) yield* Effect.sleep("20 millis")
      const crowded = yield* measured(`r${round}-behind`)
      behind.push(crowded.p99)
      held.push(queue.held.most)
      yield* Console.log(
        `round ${round}: healthy behind the silent ${queue.unit} (${queue.backlog} queued): p50 ${crowded.p50.toFixed(1)} ms, p99 ${
          crowded.p99.toFixed(1)
        } ms (${crowded.done}/${events}); server CPU ${crowded.cpuMs.toFixed(1)} ms per outcome; the silent ${queue.unit} held ${queue.held.most} of ${queue.slots} slots at most`
      )
      yield* queue.drain
      yield* Effect.sleep("1 second")
    }
    const aloneP99 = median(alone)
    const behindP99 = median(behind)
    const goal = Math.max(1000, 3 * aloneP99)
    const most = Math.max(...held)
    const quarter = Math.floor(queue.slots / 4)
    const verdict = {
      name: queue.name,
      aloneP99,
      behindP99,
      most,
      latencyMet: behindP99 <= goal,
      shareMet: most <= quarter
    }
    yield* Console.log(`${queue.name} medians: alone p99 ${aloneP99.toFixed(1)} ms; behind p99 ${behindP99.toFixed(1)} ms; silent ${queue.unit} held at most ${most} of ${queue.slots} slots`)
    yield* Console.log(
      `${queue.name} ratio: behind / alone p99 ${(behindP99 / aloneP99).toFixed(2)}; goal p99 behind ≤ max(1 s, 3 × alone) = ${goal.toFixed(0)} ms: ${
        verdict.latencyMet ? "met" : "NOT met"
      }; silent ${queue.unit} ≤ ${quarter} slots (a quarter): ${verdict.shareMet ? "met" : "NOT met"}`
    )
    return verdict
  })

const main = Effect.gen(function*() {
  const { database, serverEnv, tls } = yield* LoopbackRun.prepare("bench-fairness")
  const healthy = yield* startReceiver(tls, true)
  const silent = yield* startReceiver(tls, false)
  const silentBridge = yield* startSilentBridge(tls)
  const healthyBridge = yield* ReferenceBridge.make({ tenants: [{ tenantId: HEALTHY_TENANT, apiKey: HEALTHY_KEY }], tls })
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
      ...serverEnv,
      ...(maxPerOrigin === undefined ? {} : { DELIVERY_MAX_PER_ORIGIN: maxPerOrigin }),
      ...(maxPerBridge === undefined ? {} : { CRM_PUSH_MAX_PER_BRIDGE: maxPerBridge })
    },
    stopWithin: "20 seconds"
  })
  const call = yield* jsonClient(32)
  const sql = yield* PgClient.make({ url: database.url, maxConnections: 1 })
  const withHook = (name: string, targetUrl: string) =>
    Effect.gen(function*() {
      const account = yield* LoopbackRun.liveAccount(call, server, adminToken, name)
      yield* LoopbackRun.subscribeLeads(call, server, account.key, targetUrl)
      return account.id
    })
  const withBridge = (name: string, tenantId: string, url: string, key: string) =>
    Effect.gen(function*() {
      const account = yield* LoopbackRun.liveAccount(call, server, adminToken, name)
      yield* call("PUT", `${server.adminUrl}/v1/accounts/${account.id}/connections/${tenantId}`, adminToken, {
        transport: "rest",
        url,
        auth: { type: "api_key", key }
      })
      return account.id
    })
  const a = yield* withHook("A (silent receiver)", silent.url)
  const b = yield* withHook("B (healthy receiver)", healthy.url)
  const c = yield* withBridge("C (silent bridge)", SILENT_TENANT, silentBridge.url, "silent-bridge-key")
  const d = yield* withBridge("D (healthy bridge)", HEALTHY_TENANT, healthyBridge.restBaseUrl, HEALTHY_KEY)
  yield* Console.log(`PostgreSQL ${database.version}; one ROLE=all server; load average ${LoopbackRun.loadAverage()}`)

  const deliveries = yield* alternate({
    name: "webhook deliveries",
    unit: "receiver",
    slots: DELIVERY_SLOTS,
    held: silent.held,
    backlog,
    cpu: cpuSeconds(server.pid),
    measure: (label) =>
      Effect.flatMap(
        offer(call, server.adminUrl, adminToken, leadOutcome(b, "fairness-tenant"), `d-${label}`, events, rate),
        (accepted) => awaitAll(accepted, () => Effect.succeed(healthy.arrivals))
      ),
    fill: (round) => offer(call, server.adminUrl, adminToken, leadOutcome(a, "fairness-tenant"), `d-r${round}-silent`, backlog, 0),
    // Ends A's backlog before the next round (its running attempts fail and are not stored).
    drain: Effect.zipRight(sql`UPDATE deliveries SET status = 'failed' WHERE account_id = ${a} AND status = 'pending'`, silent.hangUp)
  })

  // When each of D's push jobs succeeded, on this process's performance clock.
  const pushesDone = (prefix: string) =>
    Effect.map(
      sql<{ call_id: string; at: number }>`SELECT call_id, (extract(epoch FROM finished_at) * 1000)::float8 AS at FROM crm_push_jobs
        WHERE account_id = ${d} AND status = 'succeeded' AND call_id LIKE ${`${prefix}-%`}`.pipe(Effect.orDie),
      (rows) => new Map(rows.map((r) => [r.call_id, Number(r.at) - performance.timeOrigin]))
    )
  const pushes = yield* alternate({
    name: "CRM pushes",
    unit: "bridge",
    slots: PUSH_SLOTS,
    held: silentBridge.held,
    backlog: pushBacklog,
    cpu: cpuSeconds(server.pid),
    measure: (label) =>
      Effect.flatMap(
        offer(call, server.adminUrl, adminToken, leadOutcome(d, HEALTHY_TENANT), `p-${label}`, events, rate),
        (accepted) => awaitAll(accepted, () => pushesDone(`p-${label}`))
      ),
    fill: (round) => offer(call, server.adminUrl, adminToken, leadOutcome(c, SILENT_TENANT), `p-r${round}-silent`, pushBacklog, 0),
    drain: Effect.zipRight(sql`UPDATE crm_push_jobs SET status = 'failed' WHERE account_id = ${c} AND status = 'pending'`, silentBridge.hangUp)
  })

  // A silent broker: E's destination passes its creation check through the listener, which then goes silent.
  const rabbit = yield* RabbitMqServer.start
  const listener = yield* SilentListener.inFront(rabbit.port)
  yield* Effect.promise(async () => {
    const model = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
    const channel = await model.createChannel()
    await channel.assertExchange("fairness", "direct", { durable: true })
    await model.close()
  })
  const e = (yield* LoopbackRun.liveAccount(call, server, adminToken, "E (silent broker)")).id
  yield* call("POST", `${server.adminUrl}/v1/accounts/${e}/destinations`, adminToken, {
    kind: "rabbitmq",
    name: "Silent broker",
    event: "lead",
    config: { url: `amqp://127.0.0.1:${listener.port}`, exchange: "fairness", routing_key: "lead" },
    credentials: { username: rabbit.user, password: rabbit.password }
  })
  yield* listener.silence
  const brokerHeld: Held = { open: 0, most: 0 }
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries
      WHERE account_id = ${e} AND status = 'pending' AND lease_expires_at > now()`.pipe(Effect.orDie)
    brokerHeld.open = row?.n ?? 0
    brokerHeld.most = Math.max(brokerHeld.most, brokerHeld.open)
    yield* Effect.sleep("50 millis")
  })))
  const brokers = yield* alternate({
    name: "deliveries behind a silent broker",
    unit: "broker",
    slots: DELIVERY_SLOTS,
    held: brokerHeld,
    backlog,
    cpu: cpuSeconds(server.pid),
    measure: (label) =>
      Effect.flatMap(
        offer(call, server.adminUrl, adminToken, leadOutcome(b, "fairness-tenant"), `s-${label}`, events, rate),
        (accepted) => awaitAll(accepted, () => Effect.succeed(healthy.arrivals))
      ),
    fill: (round) => offer(call, server.adminUrl, adminToken, leadOutcome(e, "fairness-tenant"), `s-r${round}-silent`, backlog, 0),
    // Its running attempts end with their connect timeout; nothing to hang up.
    drain: sql`UPDATE deliveries SET status = 'failed' WHERE account_id = ${e} AND status = 'pending'`
  })

  yield* Console.log("summary (p99 alone → behind a silent neighbour; most slots it held):")
  for (const q of [deliveries, pushes, brokers]) {
    yield* Console.log(
      `  ${q.name}: ${q.aloneP99.toFixed(1)} ms → ${q.behindP99.toFixed(1)} ms (ratio ${(q.behindP99 / q.aloneP99).toFixed(2)}); held ${q.most}; ${
        q.latencyMet && q.shareMet ? "goals met" : "goals NOT met"
      }`
    )
  }
})
void runMain(main)
