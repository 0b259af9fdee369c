/**
 * Removing a destination ends everything it held, against a real private
 * RabbitMQ on loopback and a real database (PGlite, or PostgreSQL with
 * DATABASE_URL): the connection its deliveries were published on closes at
 * once (not after the pool's idle time, set to an hour here), and its sealed
 * credentials are deleted from the Vault. The removal is made as the API
 * makes it, through a `Destinations` over kinds of its own, while the running
 * worker holds the connection under its kinds (as in the server, and as
 * between replicas). The broker is reached through a loopback gate (test
 * support `Gate`), which counts the connections from us still open.
 */
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { RabbitMqServer } from "@crm-relay/testing"
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as amqp from "amqplib"
import { Context, Duration, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { DestinationKinds } from "../src/DestinationKinds.js"
import { Destinations } from "../src/Destinations.js"
import * as DeliveryWorker from "../src/DeliveryWorker.js"
import * as RabbitmqDestination from "../src/RabbitmqDestination.js"
import * as WebhookDestination from "../src/WebhookDestination.js"
import * as Harness from "./support/DeliveryHarness.js"
import * as Gate from "./support/Gate.js"

class Broker extends Context.Tag("test/RemovedDestination/Broker")<Broker, {
  readonly server: RabbitMqServer.RabbitMqServer
  readonly gate: Effect.Effect.Success<typeof Gate.start>
}>() {}

const BrokerLive = Layer.scoped(
  Broker,
  Effect.gen(function*() {
    const server = yield* Effect.orDie(RabbitMqServer.start)
    const gate = yield* Gate.start
    yield* gate.open(server.port)
    // The exchange and its queue, declared by a client of the test's own (closed before the test runs).
    yield* Effect.promise(async () => {
      const model = await amqp.connect({ hostname: "127.0.0.1", port: server.port, username: server.user, password: server.password })
      model.on("error", () => {})
      const channel = await model.createChannel()
      await channel.assertExchange("removed", "direct", { durable: true })
      await channel.assertQueue("removed", { durable: true })
      await channel.bindQueue("removed", "removed", "lead")
      await model.close()
    })
    return { server, gate }
  })
)

const brokerEgress = BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(Layer.provide(DnsResolver.layerStatic({})))

// An idle time no test reaches: a connection that closes did so because of the removal.
const Kinds = DestinationKinds.layerOf(
  WebhookDestination.registered,
  DestinationKinds.register(RabbitmqDestination.layerWith({ idle: Duration.hours(1) }).pipe(Layer.provide(brokerEgress)))
)

const TestLayer = Layer.mergeAll(Destinations.Default, Kinds, BrokerLive).pipe(
  Layer.provide(Kinds),
  Layer.provideMerge(Harness.layer),
  Layer.provide(Logger.minimumLogLevel(LogLevel.None))
)

/** A `Destinations` over kinds of its own, not the worker's: what the API (or another replica) removes through. */
const apiDestinations = Effect.map(
  Layer.build(Layer.fresh(Destinations.Default.pipe(Layer.provide(Layer.fresh(Kinds))))),
  (context) => Context.get(context, Destinations)
)

/** A RabbitMQ destination of a new account through the gate, and the delivery of one lead to it by a worker started with `options`. */
const deliveredThroughGate = (options: DeliveryWorker.DeliveryWorkerOptions) =>
  Effect.gen(function*() {
    const { server, gate } = yield* Broker
    const destinations = yield* Destinations
    const account = yield* Harness.account()
    const created = yield* destinations.create({
      accountId: account.id,
      kind: "rabbitmq",
      name: "Leads",
      event: "lead",
      config: { url: `amqp://127.0.0.1:${gate.port}`, exchange: "removed", routing_key: "lead" },
      credentials: Option.some(Redacted.make(JSON.stringify({ username: server.user, password: server.password })))
    })
    // The creation's check connected and let go: nothing of ours stays open before the first delivery.
    yield* Harness.eventually(Effect.sync(() => gate.connected() === 0))
    const [id] = yield* Harness.lead(account.id)
    yield* DeliveryWorker.runWithKinds({ pollInterval: Duration.millis(100), ...options }).pipe(Effect.forkScoped)
    yield* Harness.eventually(Effect.map(Harness.row(id!), (r) => r.status === "delivered"))
    // The publisher keeps its connection for the next delivery.
    expect(gate.connected()).toBe(1)
    return { account, created }
  })

/** Milliseconds until the gate holds none of our connections (dies past `within`). */
const untilClosed = (within: Duration.DurationInput) =>
  Effect.flatMap(Broker, ({ gate }) =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.map(Harness.eventually(Effect.sync(() => gate.connected() === 0), within), () => performance.now() - started)
    }))

layer(TestLayer, { excludeTestServices: true, timeout: Duration.minutes(3) })("a removed destination", (it) => {
  it.scoped("Removing a destination closes its connection within a second in the process that holds it (removed through the API's own kinds, held by the worker's) and deletes its sealed secret", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Rechecks far apart: only the removal's announcement can close the connection in time.
      const { account, created } = yield* deliveredThroughGate({ removalRecheck: Duration.hours(1) })
      const [secret] = yield* sql<{ credentials_secret_id: string }>`
        SELECT credentials_secret_id FROM destinations WHERE id = ${created.id}`
      const vaultRows = sql<{ n: number }>`SELECT count(*)::int AS n FROM vault_secrets WHERE id = ${secret!.credentials_secret_id}`.pipe(
        Effect.map((rows) => rows[0]!.n)
      )
      expect(yield* vaultRows).toBe(1)

      const api = yield* apiDestinations
      yield* api.remove(account.id, created.id)
      // Closed by the removal: the pool's idle time is an hour, the worker's recheck an hour.
      const tookMs = yield* untilClosed(Duration.seconds(30))
      expect(tookMs).toBeLessThan(1_000)
      expect(yield* vaultRows).toBe(0)
      const [row] = yield* sql<{ credentials_secret_id: string | null; removed: boolean }>`
        SELECT credentials_secret_id, removed_at IS NOT NULL AS removed FROM destinations WHERE id = ${created.id}`
      expect(row).toEqual({ credentials_secret_id: null, removed: true })
    }))

  it.scoped("a removal the worker did not hear (its notification lost) is found by the worker's recheck, and the connection closes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { created } = yield* deliveredThroughGate({ removalRecheck: Duration.millis(200) })
      // Removed in the database without the announcement, as if the listen connection had dropped it.
      yield* sql`UPDATE destinations SET removed_at = now() WHERE id = ${created.id}`
      yield* untilClosed(Duration.seconds(30))
    }))
})
