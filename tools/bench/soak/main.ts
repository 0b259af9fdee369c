/**
 * Soak of the delivery path through crashes: `--outcomes` (10 000) call
 * outcomes accepted by a ROLE=api server while a ROLE=worker server
 * delivers them to a loopback HTTPS receiver, the worker killed with
 * SIGKILL `--kills` (5) times along the way and started again each time.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_queue npm run soak:delivery -- \
 *     [--outcomes 10000] [--kills 5] [--connections 16] [--pool 10]
 *
 * Passes when every call's event arrived, each call had exactly one
 * webhook-id (one event per call), every delivery row is `delivered`, and
 * the only duplicates are the same webhook-id received again (at-least-once
 * across a kill): those are counted and printed. Exit code 1 otherwise.
 */
import type { Certificate } from "@crm-relay/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Console, Duration, Effect, Exit, Fiber, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as Argv from "../support/Argv.js"
import { jsonClient } from "../support/Http.js"
import { listen, readBody } from "../support/HttpsListener.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { leadOutcome } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { serve } from "../support/ServerProcess.js"

const outcomes = Argv.integer("outcomes", 10_000)
const kills = Argv.integer("kills", 5, 0)
const connections = Argv.integer("connections", 16)
const pool = Argv.integer("pool", 10)

/** What the receiver saw: per call, the webhook-ids and how many requests. */
interface Seen {
  readonly idsByCall: Map<string, Set<string>>
  readonly requestsById: Map<string, number>
  total: number
}

const startReceiver = (tls: Certificate.TlsMaterial) =>
  Effect.gen(function*() {
    const seen: Seen = { idsByCall: new Map(), requestsById: new Map(), total: 0 }
    const listener = yield* listen(tls, (request, response) =>
      readBody(request, (body) => {
        seen.total++
        const id = String(request.headers["webhook-id"] ?? "")
        const callId = (JSON.parse(body) as { call_id: string }).call_id
        const ids = seen.idsByCall.get(callId) ?? new Set<string>()
        ids.add(id)
        seen.idsByCall.set(callId, ids)
        seen.requestsById.set(id, (seen.requestsById.get(id) ?? 0) + 1)
        response.writeHead(200, { "content-type": "application/json" })
        response.end("{}")
      }))
    return { seen, url: `https://127.0.0.1:${listener.port}/hooks/soak` }
  })

const main = Effect.gen(function*() {
  const { database, serverEnv, tls } = yield* LoopbackRun.prepare("soak")
  const receiver = yield* startReceiver(tls)
  const adminToken = randomBytes(24).toString("hex")
  const masterKey = randomBytes(32).toString("base64")
  const server = (role: "api" | "worker") =>
    serve({
      databaseUrl: database.url,
      pool,
      adminToken,
      masterKey,
      cpuProfileDir: undefined,
      stdout: "ignore",
      logLevel: "Error",
      env: { ROLE: role, ...serverEnv },
      stopWithin: "20 seconds"
    })
  const call = yield* jsonClient(connections)
  yield* Console.log(`PostgreSQL ${database.version}; load average ${LoopbackRun.loadAverage()}`)

  const api = yield* server("api")
  const account = yield* LoopbackRun.liveAccount(call, api, adminToken, "soak")
  yield* LoopbackRun.subscribeLeads(call, api, account.key, receiver.url)
  const body = leadOutcome(account.id, "soak-tenant")

  // Outcomes arrive all along, while the worker is killed and started again.
  const posting = yield* Effect.forEach(
    Array.from({ length: outcomes }, (_, i) => i),
    (i) => call("POST", `${api.adminUrl}/v1/calls/soak-${i}/outcome`, adminToken, body),
    { concurrency: connections, discard: true }
  ).pipe(Effect.fork)

  const started = performance.now()
  for (let kill = 1; kill <= kills; kill++) {
    // Each worker run delivers a share of the work, then dies without a word.
    const target = Math.floor((outcomes * kill) / (kills + 1))
    yield* Effect.scoped(Effect.gen(function*() {
      const worker = yield* server("worker")
      while (receiver.seen.idsByCall.size < target) {
        // Outcomes that could not be posted end the soak at once.
        const posted = yield* Fiber.poll(posting)
        if (Option.isSome(posted) && Exit.isFailure(posted.value)) return yield* Effect.failCause(posted.value.cause)
        yield* Effect.sleep("20 millis")
      }
      process.kill(worker.pid, "SIGKILL")
      yield* Console.log(
        `SIGKILL ${kill} of ${kills} after ${receiver.seen.idsByCall.size} calls delivered (${((performance.now() - started) / 1000).toFixed(0)} s)`
      )
    }))
  }
  yield* Fiber.join(posting)
  const sql = yield* PgClient.make({ url: database.url, maxConnections: 1 })
  const countStatuses = sql<{ status: string; n: string }>`SELECT status, count(*) AS n FROM deliveries GROUP BY status`.pipe(Effect.orDie)
  const isAllDelivered = (rows: ReadonlyArray<{ status: string; n: string }>) =>
    rows.length === 1 && rows[0]!.status === "delivered" && Number(rows[0]!.n) === outcomes
  yield* Effect.scoped(Effect.gen(function*() {
    yield* server("worker")
    const deadline = performance.now() + Duration.toMillis(Duration.minutes(15))
    while (receiver.seen.idsByCall.size < outcomes && performance.now() < deadline) yield* Effect.sleep("100 millis")
    // Every call arrived; the rows may not all say so yet: a killed worker's deliveries that reached the
    // receiver but were not stored stay leased until their lease ends (30 s), then go again (same id).
    while (performance.now() < deadline && !isAllDelivered(yield* countStatuses)) yield* Effect.sleep("250 millis")
  }))
  const statuses = yield* countStatuses
  const seen = receiver.seen
  const missing = outcomes - seen.idsByCall.size
  const twoEvents = [...seen.idsByCall.values()].filter((ids) => ids.size > 1).length
  const redelivered = [...seen.requestsById.values()].reduce((sum, n) => sum + (n - 1), 0)
  yield* Console.log(`outcomes: ${outcomes}; worker SIGKILLed ${kills} times; ${((performance.now() - started) / 1000).toFixed(0)} s`)
  yield* Console.log(`calls delivered: ${seen.idsByCall.size} (missing ${missing})`)
  yield* Console.log(`calls with more than one webhook-id (a second event): ${twoEvents}`)
  yield* Console.log(`requests received: ${seen.total}; same-webhook-id redeliveries (at-least-once across a kill): ${redelivered}`)
  yield* Console.log(`delivery rows: ${statuses.map((r) => `${r.status} ${r.n}`).join(", ")}`)
  const allDelivered = statuses.length === 1 && statuses[0]!.status === "delivered" && Number(statuses[0]!.n) === outcomes
  const passed = missing === 0 && twoEvents === 0 && allDelivered
  yield* Console.log(passed ? "soak passed" : "soak FAILED")
  if (!passed) yield* Effect.sync(() => {
    process.exitCode = 1
  })
})
void runMain(main)
