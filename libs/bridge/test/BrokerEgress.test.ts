import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { isIP } from "node:net"
import { BrokerEgress, type BrokerProtocol } from "../src/BrokerEgress.js"
import { DnsResolver } from "../src/DnsResolver.js"
import { expectOneSentence } from "./support/egressAssertions.js"
import { HOSTILE } from "./support/egressHostile.js"

// Nothing here connects: BrokerEgress only checks and resolves, so public
// addresses in these answers are never dialled.
const PUBLIC = "93.184.216.34"

const layer = (records: Parameters<typeof DnsResolver.layerStatic>[0], allowPrivate: ReadonlyArray<string> = []) =>
  BrokerEgress.layerWith(allowPrivate).pipe(Layer.provide(DnsResolver.layerStatic(records)))

const resolve = (protocol: BrokerProtocol, url: string) => Effect.flatMap(BrokerEgress, (egress) => egress.resolve(protocol, url))

const refusal = (protocol: BrokerProtocol, url: string) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(resolve(protocol, url))
    if (error._tag !== "EgressRefused") return yield* Effect.dieMessage(`expected a refusal, got: ${error.message}`)
    expectOneSentence(error.message)
    return error
  })

describe("BrokerEgress", () => {
  it.effect("TLS by default: amqps:// and tls:// resolve to a pinned public address, TLS verifying the host name", () =>
    Effect.gen(function*() {
      const amqp = yield* resolve("amqp", "amqps://broker.example/tenant-a")
      expect(amqp).toEqual({
        protocol: "amqp",
        host: "broker.example",
        address: PUBLIC,
        port: 5671,
        tls: true,
        servername: "broker.example",
        vhost: "tenant-a"
      })
      const nats = yield* resolve("nats", "tls://broker.example:4443")
      expect(nats).toMatchObject({ protocol: "nats", address: PUBLIC, port: 4443, tls: true, servername: "broker.example" })
    }).pipe(Effect.provide(layer({ "broker.example": [PUBLIC] }))))

  describe("Egress rules apply to broker addresses too: public only, and the same hostile-target list is refused", () => {
    const rows = HOSTILE.filter((row) => isIP(row.address) !== 0)
    for (const row of rows) {
      it.effect(`a broker host answering ${row.address} (${row.range}, ${row.cidr}) is refused`, () =>
        Effect.gen(function*() {
          for (const protocol of ["amqp", "nats"] as const) {
            const url = protocol === "amqp" ? "amqps://broker.test" : "tls://broker.test"
            const error = yield* refusal(protocol, url)
            expect(error).toMatchObject({ reason: "private_address", host: "broker.test", address: row.address })
            expect(error.range).toContain(row.cidr)
          }
        }).pipe(Effect.provide(layer({ "broker.test": [PUBLIC, row.address] }))))
    }

    it.effect("the cloud metadata addresses, as literal hosts, are refused", () =>
      Effect.gen(function*() {
        expect(yield* refusal("amqp", "amqps://169.254.169.254")).toMatchObject({ reason: "private_address" })
        expect(yield* refusal("nats", "tls://[fd00:ec2::254]:4222")).toMatchObject({ reason: "private_address" })
      }).pipe(Effect.provide(layer({}))))

    it.effect("a private address without EGRESS_ALLOW_PRIVATE is refused, with TLS or without", () =>
      Effect.gen(function*() {
        expect(yield* refusal("amqp", "amqps://127.0.0.1:5671")).toMatchObject({ reason: "private_address" })
        expect(yield* refusal("nats", "nats://10.1.2.3")).toMatchObject({ reason: "private_address" })
      }).pipe(Effect.provide(layer({}))))
  })

  describe("TLS by default; plain only where EGRESS_ALLOW_PRIVATE allows it", () => {
    it.effect("a plain scheme on a public address is refused", () =>
      Effect.gen(function*() {
        const amqp = yield* refusal("amqp", "amqp://broker.example")
        expect(amqp).toMatchObject({ reason: "plain_broker", address: PUBLIC })
        expect(amqp.message).toContain("EGRESS_ALLOW_PRIVATE")
        expect(yield* refusal("nats", "nats://broker.example")).toMatchObject({ reason: "plain_broker" })
      }).pipe(Effect.provide(layer({ "broker.example": [PUBLIC] }))))

    it.effect("a plain scheme on an allowed private address is let through, pinned to it", () =>
      Effect.gen(function*() {
        const target = yield* resolve("amqp", "amqp://rabbit.local:5673")
        expect(target).toMatchObject({ address: "127.0.0.1", port: 5673, tls: false, vhost: "/" })
        expect(yield* resolve("nats", "nats://127.0.0.1:4333")).toMatchObject({ tls: false, servername: undefined })
      }).pipe(Effect.provide(layer({ "rabbit.local": ["127.0.0.1"] }, ["127.0.0.1/32"]))))

    it.effect("one public answer among allowed private ones still makes a plain scheme refused", () =>
      Effect.gen(function*() {
        expect(yield* refusal("nats", "nats://mixed.local")).toMatchObject({ reason: "plain_broker", address: PUBLIC })
      }).pipe(Effect.provide(layer({ "mixed.local": ["127.0.0.1", PUBLIC] }, ["127.0.0.1/32"]))))
  })

  it.effect("a URL of the wrong scheme, with credentials or a query is refused before any lookup", () =>
    Effect.gen(function*() {
      expect(yield* refusal("amqp", "https://broker.example")).toMatchObject({ reason: "broker_scheme" })
      expect(yield* refusal("amqp", "tls://broker.example")).toMatchObject({ reason: "broker_scheme" })
      expect(yield* refusal("nats", "amqps://broker.example")).toMatchObject({ reason: "broker_scheme" })
      expect(yield* refusal("amqp", "amqps://user:secret@broker.example")).toMatchObject({ reason: "url_credentials" })
      expect(yield* refusal("nats", "tls://broker.example?x=1")).toMatchObject({ reason: "query_or_fragment" })
      expect(yield* refusal("amqp", "not a url")).toMatchObject({ reason: "invalid_url" })
    }).pipe(Effect.provide(layer({}))))

  it.effect("an unresolvable host is a network failure, not a refusal", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(resolve("amqp", "amqps://nowhere.test"))
      expect(error).toMatchObject({ _tag: "EgressNetworkError", kind: "dns", code: "ENOTFOUND" })
    }).pipe(Effect.provide(layer({}))))
})
