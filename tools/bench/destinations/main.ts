/**
 * The broker destinations against the limit: a plain client publishing the
 * same messages with the same guarantees (RabbitMQ: amqplib on a confirm
 * channel, persistent and mandatory; NATS: a JetStream publish with
 * Nats-Msg-Id, waiting for each ack), on private loopback brokers started for
 * the run, in alternating rounds.
 *
 *   DATABASE_URL=postgres://… npm run bench:destinations -- [--messages 5000] [--rounds 2] [--concurrency 64] [--baseline PATH]
 *
 * Each round, for RabbitMQ and for NATS, the publisher (egress, connection
 * held per destination, outcome per message) and the plain client each
 * publish `--messages` messages, `--concurrency` in flight; the order of the
 * two alternates by round. Printed: messages/s, this process's CPU per
 * message (the brokers' work is the same for both), the medians over rounds
 * and the ratio publisher / plain. Every message must be delivered.
 *
 * With DATABASE_URL, the drain joins each broker's rows (Drain.ts): the
 * built `crm-relay serve` queues `--messages` call outcomes for an account
 * whose destination is that broker, then a fresh worker process drains them
 * through the delivery queue; figures from the first to the last message at
 * the broker, CPU the worker process's per message, ratio drain / plain.
 * `--baseline PATH` (another build's `apps/server/bin/crm-relay.js`) drains
 * the same outcomes with that build's worker too, in the same rounds, and
 * prints the ratio of this build's drain to it.
 * Build the binary first (`npx nx run @crm-relay/server:build`).
 */
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { NatsConfig } from "@crm-relay/contract/Destinations/Nats"
import { RabbitmqConfig, RabbitmqCredentials } from "@crm-relay/contract/Destinations/Rabbitmq"
import * as AmqpPublisher from "@crm-relay/events/internal/brokers/AmqpPublisher"
import type { BrokerMessage, PublishOutcome } from "@crm-relay/events/internal/brokers/BrokerMessage"
import * as JetStreamPublisher from "@crm-relay/events/internal/brokers/JetStreamPublisher"
import { NatsServer, RabbitMqServer } from "@crm-relay/testing"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, headers as natsHeaders } from "@nats-io/transport-node"
import * as amqp from "amqplib"
import { Console, Effect, Layer, Logger, LogLevel, Redacted, Schema } from "effect"
import * as Argv from "../support/Argv.js"
import * as Drain from "./Drain.js"
import { builtBinary } from "../support/ServerProcess.js"
import { runMain } from "../support/runMain.js"

const messages = Argv.integer("messages", 5_000)
const rounds = Argv.integer("rounds", 2)
const concurrency = Argv.integer("concurrency", 64)
const baselineBin = Argv.text("baseline")

interface Figures {
  readonly perSecond: number
  readonly cpuMicrosPerMessage: number
  /** The drain's: outcomes accepted a second. */
  readonly acceptedPerSecond?: number
}

const batch = (label: string): ReadonlyArray<BrokerMessage> =>
  Array.from({ length: messages }, (_, index) => {
    const id = `msg_${label}_${index}`
    return {
      body: new TextEncoder().encode(JSON.stringify({ type: "lead.created", timestamp: new Date().toISOString(), data: { index, phone: "+15551234567" } })),
      messageId: id,
      headers: {
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
        "webhook-signature": `v1,${Buffer.from(id).toString("base64")}`,
        "content-type": "application/json"
      }
    }
  })

/** Runs `publish` over the messages with `concurrency` in flight; wall time and this process's CPU. */
const timed = (run: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const cpu = process.cpuUsage()
    const started = performance.now()
    yield* run
    const seconds = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    return { perSecond: messages / seconds, cpuMicrosPerMessage: (used.user + used.system) / messages } satisfies Figures
  })

const expectDelivered = (label: string) => (outcome: PublishOutcome) =>
  outcome._tag === "Delivered" ? Effect.void : Effect.dieMessage(`${label}: a message was not delivered: ${outcome.reason}`)

/** A pool of `concurrency` promise workers over `items`. */
const promisePool = <A>(items: ReadonlyArray<A>, work: (item: A) => Promise<void>) =>
  Effect.promise(async () => {
    let next = 0
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++]!)
    }))
  })

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const line = (name: string, figures: Figures) =>
  `${name.padEnd(36)} ${figures.perSecond.toFixed(0).padStart(7)} msg/s  ${figures.cpuMicrosPerMessage.toFixed(1).padStart(7)} µs CPU/msg${
    figures.acceptedPerSecond === undefined ? "" : `  (outcomes accepted at ${figures.acceptedPerSecond.toFixed(0)}/s)`
  }`

const main = Effect.gen(function*() {
  yield* Console.log(`Starting private RabbitMQ and NATS servers; ${messages} messages per run, ${concurrency} in flight, ${rounds} rounds.`)
  const rabbit = yield* RabbitMqServer.start
  const nats = yield* NatsServer.start

  // The plain clients: the same broker features the publishers use, nothing else.
  const model = yield* Effect.acquireRelease(
    Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })),
    (model) => Effect.promise(() => model.close().catch(() => {}))
  )
  const channel = yield* Effect.promise(() => model.createConfirmChannel())
  yield* Effect.promise(async () => {
    await channel.assertExchange("bench", "topic", { durable: true })
    await channel.assertQueue("bench", { durable: true })
    await channel.bindQueue("bench", "bench", "#")
  })
  const nc = yield* Effect.acquireRelease(
    Effect.promise(() => connect({ servers: `127.0.0.1:${nats.port}`, user: nats.user, pass: nats.password })),
    (nc) => Effect.promise(() => nc.close().catch(() => {}))
  )
  const jsm = yield* Effect.promise(() => jetstreamManager(nc))
  yield* Effect.promise(() => jsm.streams.add({ name: "BENCH", subjects: ["bench.leads"] }))
  const js = jetstream(nc)

  const amqpPublisher = yield* AmqpPublisher.make(
    Schema.decodeSync(RabbitmqConfig)({ url: rabbit.url, exchange: "bench", routing_key: "lead.created" }),
    RabbitmqCredentials.make({ username: rabbit.user, password: Redacted.make(rabbit.password) })
  )
  const jetStreamPublisher = yield* JetStreamPublisher.make(
    Schema.decodeSync(NatsConfig)({ url: nats.url, subject: "bench.leads" }),
    { _tag: "UserPassword", user: nats.user, password: Redacted.make(nats.password) }
  )

  const runs: Record<string, (label: string) => Effect.Effect<Figures>> = {
    "RabbitMQ publisher": (label) =>
      timed(Effect.forEach(batch(label), (message) => Effect.flatMap(amqpPublisher.publish(message), expectDelivered(label)), {
        concurrency,
        discard: true
      })),
    "RabbitMQ plain amqplib (confirms)": (label) =>
      timed(promisePool(batch(label), (message) =>
        new Promise<void>((resolve, reject) => {
          const { "content-type": contentType, ...headers } = message.headers
          channel.publish("bench", "lead.created", Buffer.from(message.body), {
            persistent: true,
            mandatory: true,
            messageId: message.messageId,
            contentType: contentType ?? "application/json",
            headers
          }, (error: unknown) => (error === null || error === undefined ? resolve() : reject(new Error(`${label}: nack`))))
        }))),
    "NATS publisher": (label) =>
      timed(Effect.forEach(batch(label), (message) => Effect.flatMap(jetStreamPublisher.publish(message), expectDelivered(label)), {
        concurrency,
        discard: true
      })),
    "NATS plain JetStream (acks)": (label) =>
      timed(promisePool(batch(label), async (message) => {
        const h = natsHeaders()
        for (const [name, value] of Object.entries(message.headers)) h.set(name, value)
        await js.publish("bench.leads", message.body, { msgID: message.messageId, headers: h })
      }))
  }

  // The drain through a running server, when there is PostgreSQL to run it on.
  const drain = yield* Drain.prepare(rabbit, nats).pipe(
    Effect.map((drain) => ({ drain })),
    Effect.catchTag("NoDatabase", (error) => Effect.as(Console.log(`${error.message} Without it: the publisher rows only.`), { drain: undefined }))
  )
  const RABBIT_DRAIN = "RabbitMQ drain through the server"
  const NATS_DRAIN = "NATS drain through the server"
  const RABBIT_BASELINE = "RabbitMQ drain, baseline build"
  const NATS_BASELINE = "NATS drain, baseline build"
  // The drain's warm-up is a few hundred events: connections open, code paths compiled.
  const warmup = (label: string) => (label.startsWith("warmup") ? Math.min(messages, 300) : messages)
  if (drain.drain !== undefined) {
    const server = drain.drain
    yield* Console.log(
      `Drain: crm-relay serve on PostgreSQL ${server.version}; a ROLE=api server queues the outcomes, a fresh ROLE=worker process drains them (its CPU per message).`
    )
    runs[RABBIT_DRAIN] = (label) => server.rabbitmq(label, warmup(label)).pipe(Effect.orDie)
    runs[NATS_DRAIN] = (label) => server.nats(label, warmup(label)).pipe(Effect.orDie)
    if (baselineBin !== undefined) {
      const bin = yield* builtBinary(baselineBin)
      yield* Console.log(`Baseline: ${bin} drains the same outcomes in the same rounds.`)
      runs[RABBIT_BASELINE] = (label) => server.rabbitmq(label, warmup(label), bin).pipe(Effect.orDie)
      runs[NATS_BASELINE] = (label) => server.nats(label, warmup(label), bin).pipe(Effect.orDie)
    }
  }
  const has = (name: string) => runs[name] !== undefined

  const results = new Map<string, Array<Figures>>(Object.keys(runs).map((name) => [name, []]))
  const groups: ReadonlyArray<ReadonlyArray<string>> = [
    ["RabbitMQ publisher", "RabbitMQ plain amqplib (confirms)", RABBIT_DRAIN, RABBIT_BASELINE].filter(has),
    ["NATS publisher", "NATS plain JetStream (acks)", NATS_DRAIN, NATS_BASELINE].filter(has)
  ]
  // A warm-up of each, not counted: connections open, code paths compiled.
  for (const name of Object.keys(runs)) yield* runs[name]!(`warmup_${name.replace(/\W+/g, "_")}`)
  for (let round = 1; round <= rounds; round++) {
    yield* Console.log(`round ${round}`)
    for (const group of groups) {
      const order = round % 2 === 1 ? group : [...group].reverse()
      for (const name of order) {
        const figures = yield* runs[name]!(`r${round}_${name.replace(/\W+/g, "_")}`)
        results.get(name)!.push(figures)
        yield* Console.log(`  ${line(name, figures)}`)
      }
    }
    yield* Effect.promise(() => channel.purgeQueue("bench"))
    yield* Effect.promise(() => jsm.streams.purge("BENCH"))
    if (drain.drain !== undefined) yield* drain.drain.purge
  }

  yield* Console.log(`medians over ${rounds} rounds`)
  for (const [product, plain, drained, baseline] of groups) {
    const of = (name: string): Figures => ({
      perSecond: median(results.get(name)!.map((figures) => figures.perSecond)),
      cpuMicrosPerMessage: median(results.get(name)!.map((figures) => figures.cpuMicrosPerMessage)),
      ...(results.get(name)![0]?.acceptedPerSecond === undefined
        ? {}
        : { acceptedPerSecond: median(results.get(name)!.map((figures) => figures.acceptedPerSecond ?? 0)) })
    })
    const ratio = (what: string, a: Figures, b: Figures) =>
      Console.log(
        `  ratio ${what} / plain: rate ${(a.perSecond / b.perSecond).toFixed(2)}, CPU per message ${(a.cpuMicrosPerMessage / b.cpuMicrosPerMessage).toFixed(2)}`
      )
    const a = of(product!)
    const b = of(plain!)
    yield* Console.log(`  ${line(product!, a)}`)
    yield* Console.log(`  ${line(plain!, b)}`)
    yield* ratio("publisher", a, b)
    if (drained !== undefined) {
      const d = of(drained)
      yield* Console.log(`  ${line(drained, d)}`)
      yield* ratio("drain", d, b)
      if (baseline !== undefined) {
        const o = of(baseline)
        yield* Console.log(`  ${line(baseline, o)}`)
        yield* Console.log(
          `  ratio drain / baseline build's drain: rate ${(d.perSecond / o.perSecond).toFixed(2)} (issue 43's goal: ≥ 2), CPU per message ${
            (d.cpuMicrosPerMessage / o.cpuMicrosPerMessage).toFixed(2)
          }`
        )
      }
    }
  }
}).pipe(
  Effect.provide(Layer.merge(
    BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(Layer.provide(DnsResolver.layerSystem)),
    Logger.minimumLogLevel(LogLevel.Warning)
  ))
)

runMain(main)
