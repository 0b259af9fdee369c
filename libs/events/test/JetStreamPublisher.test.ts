/**
 * The NATS JetStream publisher against a real, private `nats-server -js`
 * (one per file). The test's own client talks to the server directly; the
 * publisher goes through BrokerEgress, loopback allowed.
 */
import { expect, layer } from "@effect/vitest"
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { NatsConfig, type NatsCredentials } from "@crm-relay/contract/Destinations/Nats"
import { BrokerProcess, Certificate, Eventually, NatsServer, SilentListener } from "@crm-relay/testing"
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream"
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node"
import { Context, Effect, Layer, Logger, LogLevel, Redacted, Schema } from "effect"
import * as JetStreamPublisher from "../src/internal/brokers/JetStreamPublisher.js"
import { loopbackEgress, message, publishAcrossRestart, publishUntilSettled, reason } from "./support/BrokerPublishers.js"

/** The private server, requiring TLS with a certificate (signed by `ca`) for broker.localhost and 127.0.0.1. */
interface TestServer extends NatsServer.NatsServer {
  readonly ca: string
}
class Nats extends Context.Tag("test/Nats")<Nats, TestServer>() {}

const Live = Layer.mergeAll(
  Layer.scoped(
    Nats,
    Effect.gen(function*() {
      const tls = yield* Certificate.generateTlsMaterial({ dnsNames: ["broker.localhost"], ips: ["127.0.0.1"] })
      const server = yield* NatsServer.startWith({ tls })
      return { ...server, ca: tls.ca }
    }).pipe(Effect.orDie)
  ),
  loopbackEgress,
  Logger.minimumLogLevel(LogLevel.None)
)

// TLS by default: the publisher connects to tls://broker.localhost, pinned to 127.0.0.1, verifying that name.
const config = (server: TestServer, subject: string, url = `tls://broker.localhost:${server.port}`) =>
  Schema.decodeSync(NatsConfig)({ url, subject })

const credentials = (server: TestServer, password = server.password): NatsCredentials => ({
  _tag: "UserPassword",
  user: server.user,
  password: Redacted.make(password)
})

// The client names 127.0.0.1 "localhost" for TLS; name the certificate's host instead (passed on to tls.connect).
const testTls = (server: TestServer) => {
  const options: NonNullable<NodeConnectionOptions["tls"]> & { readonly servername: string } = { ca: server.ca, servername: "broker.localhost" }
  return options
}

/** The test's own JetStream manager on the private server, closed with the scope. */
const manager = Effect.gen(function*() {
  const server = yield* Nats
  const connection = yield* Effect.acquireRelease(
    Effect.promise(() => connect({ servers: `127.0.0.1:${server.port}`, user: server.user, pass: server.password, tls: testTls(server) })),
    (connection) => Effect.promise(() => connection.close().catch(() => {}))
  )
  const jsm = yield* Effect.promise(() => jetstreamManager(connection))
  return { connection, jsm }
})

const stream = (name: string, subject: string) =>
  Effect.flatMap(manager, ({ jsm }) => Effect.promise(() => jsm.streams.add({ name, subjects: [subject] })))

/** The stream's messages, once it holds `count` of them. */
const stored = (jsm: JetStreamManager, name: string, count: number) =>
  Effect.gen(function*() {
    yield* Eventually.eventually(Effect.promise(() => jsm.streams.info(name).then((info) => info.state.messages >= count)))
    const info = yield* Effect.promise(() => jsm.streams.info(name))
    return yield* Effect.forEach(
      Array.from({ length: info.state.messages }, (_, index) => info.state.first_seq + index),
      (seq) => Effect.promise(() => jsm.streams.getMessage(name, { seq }))
    ).pipe(Effect.map((messages) => messages.flatMap((stored) => (stored === null ? [] : [stored]))))
  })

layer(Live, { excludeTestServices: true, timeout: 600_000 })("NATS JetStream publisher against a real server", (it) => {
  it.scoped("a lead reaches a JetStream consumer with Nats-Msg-Id = webhook-id and the signature headers", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("LEADS", "crm.leads")
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.leads"), credentials(server), { extraCa: [server.ca] })
      const sent = message()
      expect(yield* publisher.publish(sent)).toMatchObject({ _tag: "Delivered" })
      const { connection } = yield* manager
      const consumer = yield* Effect.promise(() => jetstream(connection).consumers.get("LEADS"))
      const received = yield* Effect.promise(() => consumer.next({ expires: 30_000 }))
      expect(received).not.toBeNull()
      expect(Buffer.from(received!.data).equals(Buffer.from(sent.body))).toBe(true)
      expect(received!.headers?.get("Nats-Msg-Id")).toBe(sent.messageId)
      for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature", "content-type"]) {
        expect(received!.headers?.get(name)).toBe(sent.headers[name])
      }
    }))

  it.scoped("TLS by default: the certificate is verified against the URL's host name, not the pinned address", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("TLS", "crm.tls")
      const other = yield* JetStreamPublisher.check(config(server, "crm.tls", `tls://other.localhost:${server.port}`), credentials(server), {
        extraCa: [server.ca]
      })
      expect(other._tag === "Refused" && other.reason).toMatch(/^TLS with the NATS server at other\.localhost:\d+ failed/)
      const untrusted = yield* JetStreamPublisher.check(config(server, "crm.tls"), credentials(server))
      expect(untrusted._tag === "Refused" && untrusted.reason).toMatch(/^TLS with the NATS server at broker\.localhost/)
      expect(yield* JetStreamPublisher.check(config(server, "crm.tls"), credentials(server), { extraCa: [server.ca] })).toMatchObject({ _tag: "Ok" })
    }))

  it.scoped("JetStream's Nats-Msg-Id deduplicates redeliveries: the same delivery published twice is stored once", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("DEDUP", "crm.dedup")
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.dedup"), credentials(server), { extraCa: [server.ca] })
      const sent = message()
      expect((yield* publisher.publish(sent))._tag).toBe("Delivered")
      expect((yield* publisher.publish(sent))._tag).toBe("Delivered")
      const { jsm } = yield* manager
      const info = yield* Effect.promise(() => jsm.streams.info("DEDUP"))
      expect(info.state.messages).toBe(1)
    }))

  it.scoped("no stream for the subject is a permanent failure with the reason", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.nowhere"), credentials(server), { extraCa: [server.ca] })
      const outcome = yield* publisher.publish(message())
      expect(outcome).toMatchObject({ _tag: "Permanent", reason: "No JetStream stream captures the subject crm.nowhere." })
    }))

  it.scoped("creation checks the server: ok when a stream captures the subject; refused for no stream, a wrong password or no server", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("CHECKED", "crm.checked.>")
      expect(yield* JetStreamPublisher.check(config(server, "crm.checked.leads"), credentials(server), { extraCa: [server.ca] })).toMatchObject({ _tag: "Ok" })
      const missing = yield* JetStreamPublisher.check(config(server, "crm.unchecked"), credentials(server), { extraCa: [server.ca] })
      expect(missing._tag === "Refused" && missing.reason).toBe(
        `No JetStream stream on the NATS server at broker.localhost:${server.port} captures the subject crm.unchecked.`
      )
      const wrong = yield* JetStreamPublisher.check(config(server, "crm.checked.leads"), credentials(server, "wrong-password"), { extraCa: [server.ca] })
      expect(wrong._tag === "Refused" && wrong.reason).toBe(
        `The NATS server at broker.localhost:${server.port} refused the credentials (wrong user name, password or token).`
      )
      const port = yield* BrokerProcess.freePort
      const nobody = yield* JetStreamPublisher.check(config(server, "crm.checked.leads", `nats://127.0.0.1:${port}`), credentials(server), { extraCa: [server.ca] })
      expect(nobody._tag === "Refused" && nobody.reason).toBe(`The NATS server at 127.0.0.1:${port} refused the connection (ECONNREFUSED).`)
    }))

  it.scoped("egress: a plain nats:// URL to an address EGRESS_ALLOW_PRIVATE does not allow is refused before connecting", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      const plain = config(server, "crm.checked.leads", `nats://127.0.0.1:${server.port}`)
      const outcome = yield* JetStreamPublisher.check(plain, credentials(server), { extraCa: [server.ca] }).pipe(
        Effect.provide(BrokerEgress.layerWith([]).pipe(Layer.provide(DnsResolver.layerSystem)))
      )
      expect(outcome._tag === "Refused" && outcome.reason).toContain("loopback")
    }))

  it.scoped("a silent server (accepts, never answers) is transient within the publisher's timeout", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      const silent = yield* SilentListener.start
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.leads", `nats://127.0.0.1:${silent.port}`), credentials(server), {
        timeoutMs: 500
      })
      const outcome = yield* publisher.publish(message())
      expect(outcome._tag).toBe("Transient")
      expect(reason(outcome)).toMatch(/^[A-Z].*\.$/)
      expect(reason(outcome)).toContain(`127.0.0.1:${silent.port}`)
      expect(silent.connections()).toBeGreaterThan(0)
    }))

  it.scoped("server stopped: transient, then after a restart the same message is delivered, nothing lost", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("FAULTS", "crm.faults")
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.faults"), credentials(server), { timeoutMs: 2000, extraCa: [server.ca] })
      const first = message("before")
      expect((yield* publisher.publish(first))._tag).toBe("Delivered")
      yield* server.stop
      const during = message("during")
      const failed = yield* publisher.publish(during)
      expect(failed._tag).toBe("Transient")
      expect(reason(failed)).toMatch(/^[A-Z].*\.$/)
      yield* server.start
      expect((yield* publishUntilSettled(publisher, during)).outcome._tag).toBe("Delivered")
      const { jsm } = yield* manager
      const ids = (yield* stored(jsm, "FAULTS", 2)).map((stored) => stored.header.get("Nats-Msg-Id"))
      expect(ids).toEqual([first.messageId, during.messageId])
    }))

  it.scoped("server restarted mid-burst: every message arrives, none under two ids, none twice", () =>
    Effect.gen(function*() {
      const server = yield* Nats
      yield* stream("BURST", "crm.burst")
      const publisher = yield* JetStreamPublisher.make(config(server, "crm.burst"), credentials(server), { timeoutMs: 2000, extraCa: [server.ca] })
      const burst = Array.from({ length: 300 }, (_, index) => message(`burst-${index}`))
      const results = yield* publishAcrossRestart(publisher, server, burst)
      expect(results.every(({ outcome }) => outcome._tag === "Delivered")).toBe(true)
      expect(results.some(({ attempt }) => attempt > 1)).toBe(true)
      const { jsm } = yield* manager
      const messages = yield* stored(jsm, "BURST", burst.length)
      // Deduplication by Nats-Msg-Id: exactly one stored message per delivery, its body under its own id.
      expect(messages).toHaveLength(burst.length)
      const byId = new Map(messages.map((stored) => [stored.header.get("Nats-Msg-Id"), new TextDecoder().decode(stored.data)]))
      for (const payload of burst) expect(byId.get(payload.messageId)).toBe(new TextDecoder().decode(payload.body))
    }))
})
