/**
 * The RabbitMQ publisher against a real, private `rabbitmq-server` (one per
 * file: it takes seconds to start). The test's own consumer talks to the
 * broker directly; the publisher goes through BrokerEgress, loopback allowed.
 */
import { expect, layer } from "@effect/vitest"
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { RabbitmqConfig, RabbitmqCredentials } from "@crm-relay/contract/Destinations/Rabbitmq"
import { BrokerProcess, Certificate, Eventually, RabbitMqServer, SilentListener } from "@crm-relay/testing"
import * as amqp from "amqplib"
import { Context, Effect, Layer, Logger, LogLevel, Redacted, Schema } from "effect"
import * as AmqpPublisher from "../src/internal/brokers/AmqpPublisher.js"
import { loopbackEgress, message, publishAcrossRestart, publishUntilSettled, reason } from "./support/BrokerPublishers.js"

/** The private broker, with an amqps:// listener whose certificate (signed by `ca`) names broker.localhost only. */
interface TestBroker extends RabbitMqServer.RabbitMqServer {
  readonly ca: string
}
class Rabbit extends Context.Tag("test/Rabbit")<Rabbit, TestBroker>() {}

const Live = Layer.mergeAll(
  Layer.scoped(
    Rabbit,
    Effect.gen(function*() {
      const tls = yield* Certificate.generateTlsMaterial({ dnsNames: ["broker.localhost"], ips: [] })
      const server = yield* RabbitMqServer.startWith({ tls })
      return { ...server, ca: tls.ca }
    }).pipe(Effect.orDie)
  ),
  loopbackEgress,
  Logger.minimumLogLevel(LogLevel.None)
)

const config = (server: RabbitMqServer.RabbitMqServer, exchange: string, routingKey: string) =>
  Schema.decodeSync(RabbitmqConfig)({ url: server.url, exchange, routing_key: routingKey })

const credentials = (server: RabbitMqServer.RabbitMqServer, password = server.password) =>
  RabbitmqCredentials.make({ username: server.user, password: Redacted.make(password) })

/** The test's own client: a channel on the private broker, closed with the scope. */
const testChannel = Effect.gen(function*() {
  const server = yield* Rabbit
  const model = yield* Effect.acquireRelease(
    Effect.promise(() => amqp.connect({ hostname: "127.0.0.1", port: server.port, username: server.user, password: server.password })),
    (model) => Effect.promise(() => model.close().catch(() => {}))
  )
  model.on("error", () => {})
  const channel = yield* Effect.promise(() => model.createChannel())
  channel.on("error", () => {})
  return channel
})

/** A durable topic exchange and a durable queue bound to it with `pattern`. */
const bound = (exchange: string, queue: string, pattern: string) =>
  Effect.gen(function*() {
    const channel = yield* testChannel
    yield* Effect.promise(async () => {
      await channel.assertExchange(exchange, "topic", { durable: true })
      await channel.assertQueue(queue, { durable: true })
      await channel.bindQueue(queue, exchange, pattern)
    })
  })

/** Every message in `queue` (taken and acknowledged), once `count` have arrived. */
const drain = (queue: string, count: number) =>
  Effect.gen(function*() {
    const channel = yield* testChannel
    const taken: Array<amqp.GetMessage> = []
    yield* Eventually.eventually(Effect.promise(async () => {
      for (;;) {
        const got = await channel.get(queue, { noAck: true })
        if (got === false) break
        taken.push(got)
      }
      return taken.length >= count
    }))
    return taken
  })

layer(Live, { excludeTestServices: true, timeout: 600_000 })("RabbitMQ publisher against a real broker", (it) => {
  it.scoped("a lead reaches a queue bound to the exchange with its id and signature headers, persistent, with content-type", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.events", "leads", "lead.*")
      const publisher = yield* AmqpPublisher.make(config(server, "crm.events", "lead.created"), credentials(server))
      const sent = message()
      expect(yield* publisher.publish(sent)).toMatchObject({ _tag: "Delivered" })
      const [received] = yield* drain("leads", 1)
      expect(Buffer.from(received!.content).equals(Buffer.from(sent.body))).toBe(true)
      expect(received!.properties.messageId).toBe(sent.messageId)
      expect(received!.properties.contentType).toBe("application/json")
      expect(received!.properties.deliveryMode).toBe(2)
      expect(received!.properties.headers).toEqual({
        "webhook-id": sent.headers["webhook-id"],
        "webhook-timestamp": sent.headers["webhook-timestamp"],
        "webhook-signature": sent.headers["webhook-signature"]
      })
    }))

  it.scoped("TLS by default: amqps:// to the pinned address, the certificate verified against the URL's host name", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.tls", "tls-leads", "lead.*")
      const tlsConfig = (host: string) =>
        Schema.decodeSync(RabbitmqConfig)({ url: `amqps://${host}:${server.tlsPort}`, exchange: "crm.tls", routing_key: "lead.created" })
      const options = { extraCa: [server.ca] }
      expect(yield* AmqpPublisher.check(tlsConfig("broker.localhost"), credentials(server), options)).toMatchObject({ _tag: "Ok" })
      const publisher = yield* AmqpPublisher.make(tlsConfig("broker.localhost"), credentials(server), options)
      const sent = message()
      expect((yield* publisher.publish(sent))._tag).toBe("Delivered")
      const [received] = yield* drain("tls-leads", 1)
      expect(received!.properties.messageId).toBe(sent.messageId)
      // Same address, another name: the certificate does not name it, so TLS refuses.
      const other = yield* AmqpPublisher.check(tlsConfig("other.localhost"), credentials(server), options)
      expect(other._tag === "Refused" && other.reason).toMatch(/^TLS with the RabbitMQ broker at other\.localhost:\d+ failed/)
      // Without the test CA the certificate is not trusted.
      const untrusted = yield* AmqpPublisher.check(tlsConfig("broker.localhost"), credentials(server))
      expect(untrusted._tag === "Refused" && untrusted.reason).toMatch(/^TLS with the RabbitMQ broker/)
    }))

  it.scoped("mandatory: an unroutable message is a permanent failure with the broker's reason", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.unrouted", "unrouted-leads", "lead.*")
      const publisher = yield* AmqpPublisher.make(config(server, "crm.unrouted", "booking.created"), credentials(server))
      const outcome = yield* publisher.publish(message())
      expect(outcome._tag).toBe("Permanent")
      expect(reason(outcome)).toContain("312 NO_ROUTE")
      expect(reason(outcome)).toContain("booking.created")
      // The channel stays usable: a routable message after it is delivered.
      const routable = yield* AmqpPublisher.make(config(server, "crm.unrouted", "lead.created"), credentials(server))
      expect((yield* routable.publish(message()))._tag).toBe("Delivered")
    }))

  it.scoped("an exchange that does not exist (deleted after creation) is a permanent failure naming it", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      const publisher = yield* AmqpPublisher.make(config(server, "crm.gone", "lead.created"), credentials(server))
      const outcome = yield* publisher.publish(message())
      expect(outcome._tag).toBe("Permanent")
      expect(reason(outcome)).toContain("no exchange 'crm.gone'")
    }))

  it.scoped("creation checks the broker: ok for an existing exchange; refused for a missing exchange, a wrong password or no broker", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.checked", "checked-leads", "#")
      expect(yield* AmqpPublisher.check(config(server, "crm.checked", "x"), credentials(server))).toMatchObject({ _tag: "Ok" })
      const missing = yield* AmqpPublisher.check(config(server, "crm.missing", "x"), credentials(server))
      expect(missing).toMatchObject({ _tag: "Refused" })
      expect(missing._tag === "Refused" && missing.reason).toBe(
        `The exchange crm.missing does not exist on the RabbitMQ broker at 127.0.0.1:${server.port} (virtual host /).`
      )
      const wrong = yield* AmqpPublisher.check(config(server, "crm.checked", "x"), credentials(server, "wrong-password"))
      expect(wrong._tag === "Refused" && wrong.reason).toBe(
        `The RabbitMQ broker at 127.0.0.1:${server.port} refused the user relay (wrong user name or password).`
      )
      const port = yield* BrokerProcess.freePort
      const nobody = yield* AmqpPublisher.check(
        Schema.decodeSync(RabbitmqConfig)({ url: `amqp://127.0.0.1:${port}`, exchange: "crm.checked", routing_key: "x" }),
        credentials(server)
      )
      expect(nobody._tag === "Refused" && nobody.reason).toBe(`The RabbitMQ broker at 127.0.0.1:${port} refused the connection (ECONNREFUSED).`)
    }))

  it.scoped("egress: a plain amqp:// URL to an address EGRESS_ALLOW_PRIVATE does not allow is refused before connecting", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      const outcome = yield* AmqpPublisher.check(config(server, "crm.events", "x"), credentials(server)).pipe(
        Effect.provide(BrokerEgress.layerWith([]).pipe(Layer.provide(DnsResolver.layerSystem)))
      )
      expect(outcome._tag === "Refused" && outcome.reason).toContain("loopback")
    }))

  it.scoped("a silent broker (accepts, never answers) is transient within the publisher's timeout", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      const silent = yield* SilentListener.start
      const publisher = yield* AmqpPublisher.make(
        Schema.decodeSync(RabbitmqConfig)({ url: `amqp://127.0.0.1:${silent.port}`, exchange: "crm.events", routing_key: "x" }),
        credentials(server),
        { timeoutMs: 500 }
      )
      const outcome = yield* publisher.publish(message())
      expect(outcome._tag).toBe("Transient")
      expect(reason(outcome)).toMatch(/^[A-Z].*\.$/)
      expect(reason(outcome)).toContain(`127.0.0.1:${silent.port}`)
      expect(silent.connections()).toBeGreaterThan(0)
    }))

  it.scoped("broker stopped: transient, then after a restart the same message is delivered, nothing lost", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.faults", "fault-leads", "lead.*")
      const publisher = yield* AmqpPublisher.make(config(server, "crm.faults", "lead.created"), credentials(server), { timeoutMs: 5000 })
      const first = message("before")
      expect((yield* publisher.publish(first))._tag).toBe("Delivered")
      yield* server.stop
      const during = message("during")
      const failed = yield* publisher.publish(during)
      expect(failed._tag).toBe("Transient")
      expect(reason(failed)).toMatch(/^[A-Z].*\.$/)
      yield* server.start
      const { outcome } = yield* publishUntilSettled(publisher, during)
      expect(outcome._tag).toBe("Delivered")
      const ids = (yield* drain("fault-leads", 2)).map((received) => received.properties.messageId)
      expect(ids).toEqual([first.messageId, during.messageId])
    }))

  it.scoped("broker restarted mid-burst: every message arrives, and each under its own id only", () =>
    Effect.gen(function*() {
      const server = yield* Rabbit
      yield* bound("crm.burst", "burst-leads", "lead.*")
      const publisher = yield* AmqpPublisher.make(config(server, "crm.burst", "lead.created"), credentials(server), { timeoutMs: 5000 })
      const burst = Array.from({ length: 300 }, (_, index) => message(`burst-${index}`))
      const results = yield* publishAcrossRestart(publisher, server, burst)
      expect(results.every(({ outcome }) => outcome._tag === "Delivered")).toBe(true)
      // The restart really happened in the middle: some publishes needed a retry.
      expect(results.some(({ attempt }) => attempt > 1)).toBe(true)
      const received = yield* drain("burst-leads", burst.length)
      const byId = new Map<string, string>()
      for (const got of received) {
        const id = String(got.properties.messageId)
        const body = got.content.toString()
        // A redelivery (at-least-once) is allowed; the same event under another id, or another body under this id, is not.
        expect(byId.get(id) ?? body).toBe(body)
        byId.set(id, body)
      }
      expect([...byId.keys()].sort()).toEqual(burst.map((payload) => payload.messageId).sort())
      for (const payload of burst) expect(byId.get(payload.messageId)).toBe(new TextDecoder().decode(payload.body))
    }))
})
