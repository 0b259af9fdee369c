/**
 * Removing a broker destination closes its connection in the replica that
 * holds it, through the running servers: a ROLE=api server takes the
 * DELETE, a ROLE=worker replica (its own pool on PostgreSQL, so the signal
 * crosses the database; the one PGlite session otherwise) delivers and holds
 * the publisher connection. Each broker is reached through a TCP proxy of
 * the test's own, which counts the connections from us still open: one after
 * the delivery, none within a second of the DELETE answering. Real private
 * RabbitMQ and NATS servers on loopback.
 */
import { expect, layer } from "@effect/vitest"
import type { DestinationView } from "@crm-relay/contract/Destinations"
import type { DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { Eventually, NatsServer, RabbitMqServer } from "@crm-relay/testing"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as amqp from "amqplib"
import { Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { bridgeSide } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import * as TcpProxy from "./support/TcpProxy.js"
import { accountWithKey, adminOf, harnessOver, layerServer, leadOutcome, replica, start } from "./support/TestServer.js"

class Harness extends Context.Tag("test/RemovedBrokerDestinationHarness")<Harness, {
  /** The internal API of the ROLE=api server: every request of the test goes there. */
  readonly admin: string
  readonly rabbit: RabbitMqServer.RabbitMqServer
  readonly nats: NatsServer.NatsServer
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const rabbit = yield* Effect.orDie(RabbitMqServer.start)
    const nats = yield* Effect.orDie(NatsServer.start)
    const api = yield* start(layerServer({ role: "api", bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
    yield* start(yield* replica(layerServer({ role: "worker", bridge: bridgeSide([tls.ca]) }))).pipe(Effect.orDie)
    return { admin: api.admin, rabbit, nats }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

const postLead = (accountId: string) => admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, leadOutcome(accountId))

const delivered = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries?limit=10`), (a) => (a.json as DeliveryPage).deliveries)

/**
 * The destination created through the proxy, one lead delivered by the worker, the worker's connection
 * open; then the DELETE through the API server: milliseconds from its answer until no connection is open.
 */
const deliverThenRemove = (accountId: string, proxy: TcpProxy.TcpProxy, destination: Record<string, unknown>) =>
  Effect.gen(function*() {
    const created = yield* admin("POST", `/v1/accounts/${accountId}/destinations`, destination)
    expect(created.status).toBe(201)
    const { id } = created.json as DestinationView
    // The creation's check connected and let go.
    yield* Eventually.eventually(Effect.sync(() => proxy.connected() === 0))
    expect((yield* postLead(accountId)).status).toBe(202)
    yield* eventually(delivered(accountId), (d) => d.length === 1 && d[0]!.status === "delivered")
    // The worker keeps its publisher's connection for the next delivery (the pool's idle time is minutes).
    expect(proxy.connected()).toBe(1)

    expect((yield* admin("DELETE", `/v1/accounts/${accountId}/destinations/${id}`)).status).toBe(204)
    const answered = performance.now()
    yield* Eventually.eventually(Effect.sync(() => proxy.connected() === 0), Duration.seconds(30))
    return performance.now() - answered
  })

layer(harness, { excludeTestServices: true, timeout: Duration.minutes(5) })("a removed broker destination across replicas", (it) => {
  it.scoped("Removing a destination (DELETE on the API replica) closes the RabbitMQ connection the worker replica held within a second", () =>
    Effect.gen(function*() {
      const { rabbit } = yield* Harness
      const { accountId } = yield* accountWithKey()
      yield* Effect.promise(async () => {
        const model = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
        model.on("error", () => {})
        const channel = await model.createChannel()
        await channel.assertExchange("removed", "direct", { durable: true })
        await channel.assertQueue("removed", { durable: true })
        await channel.bindQueue("removed", "removed", "lead")
        await model.close()
      })
      const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: rabbit.port })
      const tookMs = yield* deliverThenRemove(accountId, proxy, {
        kind: "rabbitmq",
        name: "Our queue",
        event: "lead",
        config: { url: `amqp://127.0.0.1:${proxy.port}`, exchange: "removed", routing_key: "lead" },
        credentials: { username: rabbit.user, password: rabbit.password }
      })
      expect(tookMs).toBeLessThan(1_000)
    }))

  it.scoped("Removing a destination (DELETE on the API replica) closes the NATS connection the worker replica held within a second", () =>
    Effect.gen(function*() {
      const { nats } = yield* Harness
      const { accountId } = yield* accountWithKey()
      const connection = yield* Effect.acquireRelease(
        Effect.promise(() => connect({ servers: `127.0.0.1:${nats.port}`, user: nats.user, pass: nats.password })),
        (c) => Effect.promise(() => c.close().catch(() => {}))
      )
      const jsm = yield* Effect.promise(() => jetstreamManager(connection))
      yield* Effect.promise(() => jsm.streams.add({ name: "REMOVED", subjects: ["removed.>"] }))
      const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: nats.port })
      const tookMs = yield* deliverThenRemove(accountId, proxy, {
        kind: "nats",
        name: "Our stream",
        event: "lead",
        config: { url: `nats://127.0.0.1:${proxy.port}`, subject: "removed.leads", stream: "REMOVED" },
        credentials: { user: nats.user, password: nats.password }
      })
      expect(tookMs).toBeLessThan(1_000)
    }))
})
