/**
 * The drain through the delivery queue, as bench:delivery measures it for
 * webhooks: the built `crm-relay serve` on PostgreSQL from DATABASE_URL,
 * one account whose RabbitMQ destination receives its leads and another
 * whose NATS JetStream destination does. A ROLE=api server (up for the
 * whole run) accepts `count` call outcomes for one of them, each queuing one
 * delivery, while no worker runs; then a fresh ROLE=worker process drains
 * them to the broker: the claim, signing, the publish and its confirm or
 * ack, the finish. Figures: messages a second from the first to the last
 * arrival at the broker, the worker process's CPU per message over its
 * drain, and the rate the outcomes were accepted at (for reference).
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import type { NatsServer, RabbitMqServer } from "@crm-relay/testing"
import * as amqp from "amqplib"
import { Duration, Effect } from "effect"
import { randomBytes } from "node:crypto"
import { jsonClient } from "../support/Http.js"
import * as LoopbackRun from "../support/LoopbackRun.js"
import { leadOutcome } from "../support/Receiver.js"
import { cpuSeconds, serve } from "../support/ServerProcess.js"

/** Where the server's destinations publish: the exchange and queue, the stream and subject. */
const EXCHANGE = "drain"
const STREAM = "DRAIN"
const SUBJECT = "drain.leads"

/** One measured drain. */
export interface DrainFigures {
  readonly perSecond: number
  /** The worker process's CPU (user + system) per message over its drain, in µs. */
  readonly cpuMicrosPerMessage: number
  /** How fast the server accepted the outcomes (the drain cannot be faster than its intake). */
  readonly acceptedPerSecond: number
}

/** Outcomes posted at once (HTTP connections to the server's internal API). */
const POSTING = 32

/**
 * Starts the server and both destinations for the scope; answers one drain run per broker
 * (`count` events, call ids prefixed by `label`).
 */
export const prepare = (rabbit: RabbitMqServer.RabbitMqServer, nats: NatsServer.NatsServer) =>
  Effect.gen(function*() {
    const { database, serverEnv } = yield* LoopbackRun.prepare("bench-destinations")
    const adminToken = randomBytes(24).toString("hex")
    const masterKey = randomBytes(32).toString("base64")
    const start = (role: "api" | "worker", bin?: string) =>
      serve({
        bin,
        databaseUrl: database.url,
        pool: 10,
        adminToken,
        masterKey,
        cpuProfileDir: undefined,
        stdout: "ignore",
        logLevel: "Error",
        env: { ROLE: role, ...serverEnv },
        stopWithin: "20 seconds"
      })
    const server = yield* start("api")
    const call = yield* jsonClient(POSTING)

    // The broker side, read by the bench's own clients: a queue bound to the exchange, a stream on the subject.
    const model = yield* Effect.acquireRelease(
      Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })),
      (model) => Effect.promise(() => model.close().catch(() => {}))
    )
    const channel = yield* Effect.promise(() => model.createChannel())
    yield* Effect.promise(async () => {
      await channel.assertExchange(EXCHANGE, "direct", { durable: true })
      await channel.assertQueue(EXCHANGE, { durable: true })
      await channel.bindQueue(EXCHANGE, EXCHANGE, "lead")
    })
    const nc = yield* Effect.acquireRelease(
      Effect.promise(() => connect({ servers: `127.0.0.1:${nats.port}`, user: nats.user, pass: nats.password })),
      (nc) => Effect.promise(() => nc.close().catch(() => {}))
    )
    const jsm = yield* Effect.promise(() => jetstreamManager(nc))
    yield* Effect.promise(() => jsm.streams.add({ name: STREAM, subjects: [SUBJECT] }))

    const withDestination = (name: string, destination: Record<string, unknown>) =>
      Effect.gen(function*() {
        const account = yield* LoopbackRun.liveAccount(call, server, adminToken, name)
        yield* call("POST", `${server.adminUrl}/v1/accounts/${account.id}/destinations`, adminToken, { name, event: "lead", ...destination })
        return account.id
      })
    const rabbitAccount = yield* withDestination("Drain to RabbitMQ", {
      kind: "rabbitmq",
      config: { url: rabbit.url, exchange: EXCHANGE, routing_key: "lead" },
      credentials: { username: rabbit.user, password: rabbit.password }
    })
    const natsAccount = yield* withDestination("Drain to NATS", {
      kind: "nats",
      config: { url: nats.url, subject: SUBJECT, stream: STREAM },
      credentials: { user: nats.user, password: nats.password }
    })

    const held = {
      rabbitmq: Effect.promise(() => channel.checkQueue(EXCHANGE).then((queue) => queue.messageCount)),
      nats: Effect.promise(() => jsm.streams.info(STREAM).then((info) => info.state.messages))
    }

    /** Polls `count` until it reaches `target`; when it first moved past `from`. */
    const awaitCount = (label: string, count: Effect.Effect<number>, from: number, target: number) =>
      Effect.gen(function*() {
        const deadline = performance.now() + Duration.toMillis(Duration.minutes(10))
        let first: { readonly at: number; readonly count: number } | undefined
        for (;;) {
          const now = yield* count
          if (first === undefined && now > from) first = { at: performance.now(), count: now }
          if (now >= target) return first!
          if (performance.now() > deadline) return yield* Effect.dieMessage(`${label}: not every event reached the broker within 10 minutes.`)
          yield* Effect.sleep("20 millis")
        }
      })

    // `bin`: another build's binary drains (the outcomes are queued by this build's API server).
    const drain = (accountId: string, count: Effect.Effect<number>) => (label: string, events: number, bin?: string) =>
      Effect.gen(function*() {
        const before = yield* count
        const posting = performance.now()
        yield* server.whileRunning(Effect.forEach(
          Array.from({ length: events }, (_, i) => i),
          (i) => call("POST", `${server.adminUrl}/v1/calls/${label}-${i}/outcome`, adminToken, leadOutcome(accountId)),
          { concurrency: POSTING, discard: true }
        ))
        const accepted = events / ((performance.now() - posting) / 1000)
        return yield* Effect.scoped(Effect.gen(function*() {
          const worker = yield* start("worker", bin)
          const cpu = yield* cpuSeconds(worker.pid)
          const first = yield* worker.whileRunning(awaitCount(label, count, before, before + events))
          const last = performance.now()
          const used = (yield* cpuSeconds(worker.pid)) - cpu
          // From the first arrival on: the messages that came after it, over the time they took.
          const after = before + events - first.count
          return {
            perSecond: after / ((last - first.at) / 1000),
            cpuMicrosPerMessage: (used * 1e6) / events,
            acceptedPerSecond: accepted
          } satisfies DrainFigures
        }))
      })

    return {
      version: database.version,
      rabbitmq: drain(rabbitAccount, held.rabbitmq),
      nats: drain(natsAccount, held.nats),
      /** Empties the queue and the stream between rounds. */
      purge: Effect.promise(async () => {
        await channel.purgeQueue(EXCHANGE)
        await jsm.streams.purge(STREAM)
      })
    }
  })
