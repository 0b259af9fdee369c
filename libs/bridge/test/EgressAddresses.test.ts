import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { isIP } from "node:net"
import * as AddressPolicy from "../src/AddressPolicy.js"
import { DnsResolver } from "../src/DnsResolver.js"
import { Egress, type EgressError, EgressRefused } from "../src/Egress.js"
import { makePinnedConnector } from "../src/internal/egress/pinnedConnector.js"
import { prepareRequest } from "../src/internal/egress/prepareRequest.js"
import { expectOneSentence } from "./support/egressAssertions.js"
import { HOSTILE } from "./support/egressHostile.js"
import { httpsServer, ok, ResolverCalls, silentListener, testEgress } from "./support/egressServers.js"

const sendTo = (url: string) =>
  Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}", options: { purpose: "bridge" } }))

const refusedAddress = (error: EgressError): EgressRefused => {
  expect(error._tag).toBe("EgressRefused")
  const refused = error as EgressRefused
  expect(refused.reason).toBe("private_address")
  expectOneSentence(refused.message)
  return refused
}

/** What the pinned connector (public addresses only, resolver of the context) reports for `hostname:port`. */
const connectError = (hostname: string, port: string) =>
  Effect.gen(function*() {
    const connector = makePinnedConnector({
      resolver: yield* DnsResolver,
      policy: AddressPolicy.publicOnly,
      runtime: yield* Effect.runtime<never>(),
      ca: undefined,
      connectTimeoutMs: 1000
    })
    return yield* Effect.async<unknown>((resume) => {
      connector({ hostname, host: `${hostname}:${port}`, protocol: "https:", port }, (...[err, socket]) => {
        socket?.destroy()
        resume(Effect.succeed(err))
      })
    })
  })

// DNS answers are canonical addresses; the odd spellings only matter for literal hosts.
const DNS_ROWS = HOSTILE.filter((row) => isIP(row.address) !== 0)

describe("Egress address rules", () => {
  describe("Transport rule: every DNS answer must be public", () => {
    // The permitted answer comes first and a server listens on it, so even a
    // broken policy would connect to loopback, never to the hostile address.
    for (const row of DNS_ROWS) {
      it.live(`a DNS answer in ${row.range} (${row.cidr}), ${row.address}, refuses the whole host`, () =>
        Effect.gen(function*() {
          const server = yield* httpsServer(ok, { host: "127.0.0.2" })
          const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/capabilities`))
          const refused = refusedAddress(error)
          expect(refused.address).toBe(row.address)
          expect(refused.host).toBe("bridge.test")
          expect(refused.range).toContain(row.cidr)
          expect(server.connections()).toBe(0)
        }).pipe(
          Effect.scoped,
          Effect.provide(testEgress({ "bridge.test": ["127.0.0.2", row.address] }, { allowPrivate: ["127.0.0.2/32"] }))
        ))
    }

    it.live("loopback is refused without EGRESS_ALLOW_PRIVATE, whichever answer comes first", () =>
      Effect.gen(function*() {
        const server = yield* httpsServer(ok)
        const only = refusedAddress(yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)))
        expect(only.message).toBe(
          "The host bridge.test resolves to 127.0.0.1, which is in the loopback range 127.0.0.0/8; only public addresses are reachable."
        )
        const ipv6 = refusedAddress(yield* Effect.flip(sendTo(`https://v6.test:${server.port}/`)))
        expect(ipv6.address).toBe("::1")
        const localhost = refusedAddress(yield* Effect.flip(sendTo(`https://localhost:${server.port}/`)))
        expect(localhost.address).toBe("127.0.0.1")
        expect(server.connections()).toBe(0)
      }).pipe(
        Effect.scoped,
        Effect.provide(testEgress({ "bridge.test": ["127.0.0.1"], "v6.test": ["::1"], "localhost": ["127.0.0.1", "::1"] }))
      ))

    it.live("mixed answers: one private answer among permitted ones refuses the host, in any position", () =>
      Effect.gen(function*() {
        const server = yield* httpsServer(ok)
        const last = refusedAddress(yield* Effect.flip(sendTo(`https://last.test:${server.port}/`)))
        expect(last.address).toBe("127.0.0.3")
        const first = refusedAddress(yield* Effect.flip(sendTo(`https://first.test:${server.port}/`)))
        expect(first.address).toBe("127.0.0.3")
        expect(server.connections()).toBe(0)
      }).pipe(
        Effect.scoped,
        Effect.provide(testEgress(
          { "last.test": ["127.0.0.1", "::1", "127.0.0.3"], "first.test": ["127.0.0.3", "127.0.0.1"] },
          { allowPrivate: ["127.0.0.1/32", "::1/128"] }
        ))
      ))

    it.live("NXDOMAIN and resolver failures are network errors naming the code", () =>
      Effect.gen(function*() {
        const missing = yield* Effect.flip(sendTo("https://missing.test/"))
        expect(missing).toMatchObject({ _tag: "EgressNetworkError", kind: "dns", host: "missing.test" })
        expect(missing.message).toBe(
          "Could not complete the exchange with missing.test: the host name could not be resolved (ENOTFOUND)."
        )
        const flaky = yield* Effect.flip(sendTo("https://flaky.test/"))
        expect(flaky).toMatchObject({ _tag: "EgressNetworkError", kind: "dns" })
        expect(flaky.message).toContain("EAI_AGAIN")
        const empty = yield* Effect.flip(sendTo("https://empty.test/"))
        expect(empty).toMatchObject({ _tag: "EgressNetworkError", kind: "dns" })
      }).pipe(Effect.provide(testEgress({ "flaky.test": { error: "EAI_AGAIN" }, "empty.test": [] }))))
  })

  describe("Transport rule: the selected address is pinned (DNS rebinding)", () => {
    it.live("the address connected is the one validated: a rebinding answer never reaches the private host", () =>
      Effect.gen(function*() {
        // The permitted host answers with Connection: close, so each exchange needs a new connection and lookup.
        const permitted = yield* httpsServer((_, res) => {
          res.writeHead(200, { connection: "close" })
          res.end("{}")
        })
        const privateHost = yield* silentListener({ host: "127.0.0.2", port: permitted.port })
        const calls = yield* ResolverCalls
        const url = `https://bridge.test:${permitted.port}/capabilities`

        const first = yield* sendTo(url)
        expect(first.status).toBe(200)
        // One resolution per connection: there is no separate "check" lookup whose answer could differ.
        expect(calls.get("bridge.test")).toBe(1)

        const second = refusedAddress(yield* Effect.flip(sendTo(url)))
        expect(second.address).toBe("127.0.0.2")
        expect(calls.get("bridge.test")).toBe(2)
        expect(permitted.requests).toHaveLength(1)
        expect(privateHost.connections()).toBe(0)
      }).pipe(
        Effect.scoped,
        Effect.provide(testEgress(
          { "bridge.test": { sequence: [["127.0.0.1"], ["127.0.0.2"]] } },
          { allowPrivate: ["127.0.0.1/32"] }
        ))
      ))
  })

  describe("EGRESS_ALLOW_PRIVATE lets exactly the listed CIDRs through", () => {
    it.live("127.0.0.1/32 reaches 127.0.0.1 but not 127.0.0.2", () =>
      Effect.gen(function*() {
        const allowed = yield* httpsServer(ok)
        const neighbour = yield* httpsServer(ok, { host: "127.0.0.2", port: allowed.port })
        expect((yield* sendTo(`https://bridge.test:${allowed.port}/`)).status).toBe(200)
        const refused = refusedAddress(yield* Effect.flip(sendTo(`https://receiver.test:${allowed.port}/`)))
        expect(refused.address).toBe("127.0.0.2")
        expect(allowed.requests).toHaveLength(1)
        expect(neighbour.connections()).toBe(0)
      }).pipe(
        Effect.scoped,
        Effect.provide(testEgress(
          { "bridge.test": ["127.0.0.1"], "receiver.test": ["127.0.0.2"] },
          { allowPrivate: ["127.0.0.1/32"] }
        ))
      ))

    it.live("::1/128 reaches an IPv6 loopback server, by name and as a bracketed literal", () =>
      Effect.gen(function*() {
        const server = yield* httpsServer(ok, { host: "::1" })
        expect((yield* sendTo(`https://bridge.test:${server.port}/`)).status).toBe(200)
        expect((yield* sendTo(`https://[::1]:${server.port}/`)).status).toBe(200)
        expect(server.requests).toHaveLength(2)
      }).pipe(Effect.scoped, Effect.provide(testEgress({ "bridge.test": ["::1"] }, { allowPrivate: ["::1/128"] }))))
  })

  describe("literal-IP hosts are checked too", () => {
    // Judged by the same pure check egress runs before sending (no socket is involved).
    const policy = AddressPolicy.publicOnly
    for (const row of HOSTILE.filter((r) => !r.address.includes("%"))) {
      const host = row.address.includes(":") && !row.address.startsWith("[") ? `[${row.address}]` : row.address
      it(`https://${host}/ is refused as ${row.range} (${row.cidr})`, () => {
        const result = prepareRequest(policy, { method: "POST", url: `https://${host}/capabilities` })
        expect(Either.isLeft(result)).toBe(true)
        if (Either.isRight(result)) return
        expect(result.left.reason).toBe("private_address")
        expect(result.left.range).toContain(row.cidr)
      })
    }

    it.live("loopback literals in every spelling URL parsing accepts are refused before connecting", () =>
      Effect.gen(function*() {
        const server = yield* httpsServer(ok)
        const v6 = yield* httpsServer(ok, { host: "::1" })
        for (const host of ["127.0.0.1", "2130706433", "0x7f.1", "127.1", "0177.0.0.1", "0x7f000001"]) {
          const refused = refusedAddress(yield* Effect.flip(sendTo(`https://${host}:${server.port}/`)))
          expect(refused.address).toBe("127.0.0.1")
          expect(refused.message).toBe(
            "The address 127.0.0.1 is in the loopback range 127.0.0.0/8; only public addresses are reachable."
          )
        }
        for (const host of ["[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"]) {
          refusedAddress(yield* Effect.flip(sendTo(`https://${host}:${v6.port}/`)))
        }
        expect(server.connections()).toBe(0)
        expect(v6.connections()).toBe(0)
      }).pipe(Effect.scoped, Effect.provide(testEgress({}))))

    it.live("a permitted literal connects and TLS verifies the certificate's IP address", () =>
      Effect.gen(function*() {
        const server = yield* httpsServer(ok)
        expect((yield* sendTo(`https://127.0.0.1:${server.port}/`)).status).toBe(200)
        // 2130706433 is 127.0.0.1 once parsed.
        expect((yield* sendTo(`https://2130706433:${server.port}/`)).status).toBe(200)
      }).pipe(Effect.scoped, Effect.provide(testEgress({}, { allowPrivate: ["127.0.0.1/32"] }))))

    it.effect("the connector itself refuses a literal private address (defence in depth behind the pre-send check)", () =>
      Effect.gen(function*() {
        const error = yield* connectError("127.0.0.1", "9")
        expect(error).toBeInstanceOf(EgressRefused)
        expect(error).toMatchObject({ reason: "private_address", address: "127.0.0.1" })
      }).pipe(Effect.provide(DnsResolver.layerStatic({}))))

    it.effect("the connector's lookup refuses a private answer with the egress error itself", () =>
      Effect.gen(function*() {
        const error = yield* connectError("meta.test", "443")
        expect(error).toBeInstanceOf(EgressRefused)
        expect(error).toMatchObject({ reason: "private_address", address: "169.254.169.254" })
      }).pipe(Effect.provide(DnsResolver.layerStatic({ "meta.test": ["169.254.169.254"] }))))
  })
})
