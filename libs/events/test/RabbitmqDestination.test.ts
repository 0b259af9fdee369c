/**
 * The RabbitMQ kind through the shared destination kit, against a real,
 * private `rabbitmq-server` on loopback (plain AMQP: loopback is allowed as
 * EGRESS_ALLOW_PRIVATE would allow it). Each kit test gets queues of its own
 * bound to one topic exchange; what arrived is read by the test's own client.
 */
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { Eventually, RabbitMqServer, SilentListener } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Duration, Effect, Layer, Logger, LogLevel, Option, Redacted, Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { Target } from "../src/Destination.js"
import * as RabbitmqDestination from "../src/RabbitmqDestination.js"
import { type Arrived, DestinationFixture, message, suite } from "./support/DestinationKit.js"
import * as Gate from "./support/Gate.js"

const EXCHANGE = "kit"

const targetOf = (url: string, routingKey: string, credentials: { username: string; password: string }): Target => ({
  config: { url, exchange: EXCHANGE, routing_key: routingKey },
  credentials: Option.some(Redacted.make(JSON.stringify(credentials)))
})

const routingKeyOf = (target: Target) => (target.config as { readonly routing_key: string }).routing_key

/** The broker, the test's own channel on it, and fresh targets for each kit test. */
const fixture = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const server = yield* Effect.orDie(RabbitMqServer.start)
  const silent = yield* SilentListener.start
  const model = yield* Effect.acquireRelease(
    Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: server.port, username: server.user, password: server.password })),
    (model) => Effect.promise(() => model.close().catch(() => {}))
  )
  model.on("error", () => {})
  const channel = yield* Effect.promise(() => model.createChannel())
  yield* Effect.promise(() => channel.assertExchange(EXCHANGE, "topic", { durable: true }))
  const credentials = { username: server.user, password: server.password }
  // Messages taken from each queue so far (a get takes them off the queue).
  const taken = new Map<string, Array<Arrived>>()
  let tests = 0
  const bind = (key: string) =>
    Effect.promise(async () => {
      await channel.assertQueue(key, { durable: true })
      await channel.bindQueue(key, EXCHANGE, key)
      taken.set(key, [])
    })
  const targets = Effect.gen(function*() {
    const base = `kit.${++tests}.${randomUUID().slice(0, 8)}`
    yield* bind(`${base}.accepting`)
    yield* bind(`${base}.flaky`)
    yield* bind(`${base}.outage`)
    // Gates live as long as the suite's broker, not the call that made them.
    const gate = yield* Scope.extend(Gate.start, scope)
    const unused = yield* Scope.extend(Gate.start, scope)
    const outage = yield* Scope.extend(Gate.start, scope)
    yield* outage.open(server.port)
    return {
      accepting: targetOf(server.url, `${base}.accepting`, credentials),
      // A gate that drops every connection: the broker cannot be reached now.
      transient: targetOf(`amqp://127.0.0.1:${unused.port}`, `${base}.transient`, credentials),
      // Nothing is bound to this routing key: `mandatory` returns it, unroutable.
      permanent: targetOf(server.url, `${base}.nowhere`, credentials),
      silent: targetOf(`amqp://127.0.0.1:${silent.port}`, `${base}.silent`, credentials),
      flaky: { target: targetOf(`amqp://127.0.0.1:${gate.port}`, `${base}.flaky`, credentials), heal: gate.open(server.port) },
      outage: {
        target: targetOf(`amqp://127.0.0.1:${outage.port}`, `${base}.outage`, credentials),
        down: outage.close,
        up: outage.open(server.port)
      },
      arrived: (target: Target) =>
        Effect.promise(async () => {
          const queue = routingKeyOf(target)
          const list = taken.get(queue)
          if (list === undefined) return []
          for (;;) {
            const got = await channel.get(queue, { noAck: true })
            if (got === false) break
            const headers: Record<string, string> = {}
            for (const [name, value] of Object.entries(got.properties.headers ?? {})) headers[name] = String(value)
            list.push({ id: String(got.properties.messageId), headers, body: got.content.toString("utf8") })
          }
          return [...list]
        })
    }
  })
  return { server, targets }
})

const egress = BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(Layer.provide(DnsResolver.layerStatic({})))

/** The kind (its deadline far beyond any test, so a silent broker is still waited on) and its fixture. */
const KindLayer = Layer.unwrapScoped(Effect.map(fixture, ({ targets }) =>
  Layer.merge(
    RabbitmqDestination.layerWith({ timeoutMs: Duration.toMillis(Duration.minutes(2)) }).pipe(Layer.provide(egress)),
    Layer.succeed(DestinationFixture, { targets })
  ))).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.None)))

suite(RabbitmqDestination.KIND, KindLayer)

describe("RabbitmqDestination", () => {
  it.scopedLive("check refuses a wrong password, a missing exchange and missing credentials with one sentence each; one connection is kept per destination", () =>
    Effect.gen(function*() {
      const server = yield* Effect.orDie(RabbitMqServer.start)
      const destination = yield* RabbitmqDestination.makeService()
      const url = server.url
      const good = { username: server.user, password: server.password }
      const wrong = yield* Effect.flip(destination.check(targetOf(url, "x", { ...good, password: "not-it" })))
      expect(wrong).toMatchObject({ reason: "auth" })
      expect(wrong.message).toMatch(/^The RabbitMQ broker at 127\.0\.0\.1:\d+ refused the user .* \(wrong user name or password\)\.$/)
      const missing = yield* Effect.flip(destination.check({ ...targetOf(url, "x", good), config: { url, exchange: "absent", routing_key: "x" } }))
      expect(missing).toMatchObject({ reason: "missing" })
      expect(missing.message).toMatch(/^The exchange absent does not exist/)
      const none = yield* Effect.flip(destination.check({ ...targetOf(url, "x", good), credentials: Option.none() }))
      expect(none.message).toBe("The rabbitmq destination's credentials must be given: username and password.")

      // One connection per destination, kept for every publish.
      const gate = yield* Gate.start
      yield* gate.open(server.port)
      const model = yield* Effect.acquireRelease(
        Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: server.port, username: server.user, password: server.password })),
        (model) => Effect.promise(() => model.close().catch(() => {}))
      )
      model.on("error", () => {})
      const channel = yield* Effect.promise(() => model.createChannel())
      yield* Effect.promise(async () => {
        await channel.assertExchange("idle", "fanout", { durable: true })
        await channel.assertQueue("idle", { durable: true })
        await channel.bindQueue("idle", "idle", "")
      })
      const viaGate = `amqp://127.0.0.1:${gate.port}`
      const target = { ...targetOf(viaGate, "", good), config: { url: viaGate, exchange: "idle", routing_key: "" } }
      for (let i = 0; i < 3; i++) expect((yield* destination.publish(message(target)))._tag).toBe("Delivered")
      expect(gate.accepted()).toBe(1)
      expect((yield* Effect.promise(() => channel.checkQueue("idle"))).messageCount).toBe(3)
    }).pipe(Effect.provide(egress)))

  it.scopedLive("a destination's connection unused for the idle time is closed (its own scope, not the kind's), and the next publish opens another", () =>
    Effect.gen(function*() {
      const server = yield* Effect.orDie(RabbitMqServer.start)
      const destination = yield* RabbitmqDestination.makeService({ idle: Duration.millis(300) })
      const gate = yield* Gate.start
      yield* gate.open(server.port)
      const model = yield* Effect.acquireRelease(
        Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: server.port, username: server.user, password: server.password })),
        (model) => Effect.promise(() => model.close().catch(() => {}))
      )
      model.on("error", () => {})
      const channel = yield* Effect.promise(() => model.createChannel())
      yield* Effect.promise(() => channel.assertExchange("swept", "fanout", { durable: true }))
      const viaGate = `amqp://127.0.0.1:${gate.port}`
      const target = {
        ...targetOf(viaGate, "", { username: server.user, password: server.password }),
        config: { url: viaGate, exchange: "swept", routing_key: "" }
      }
      // Nothing is bound to the exchange: unroutable, but the connection was opened and kept all the same.
      yield* destination.publish(message(target))
      expect(gate.accepted()).toBe(1)
      yield* Eventually.eventually(Effect.sync(() => gate.connected() === 0))
      yield* destination.publish(message(target))
      expect(gate.accepted()).toBe(2)
    }).pipe(Effect.provide(egress)))
})
