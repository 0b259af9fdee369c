import { Certificate } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Egress, type EgressNetworkError } from "../src/Egress.js"
import { expectOneSentence } from "./support/egressAssertions.js"
import { httpsServer, LOOPBACK_DNS, ok, testEgress } from "./support/egressServers.js"

const sendTo = (url: string) => Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}" }))

const tlsFailure = (error: { readonly _tag: string; readonly message: string }) => {
  expect(error._tag).toBe("EgressNetworkError")
  const network = error as EgressNetworkError
  expect(network.kind).toBe("tls")
  expectOneSentence(network.message)
  return network
}

const dns = { ...LOOPBACK_DNS, "evil.test": ["127.0.0.1"] }

describe("Egress TLS", () => {
  it.live("Transport rule: TLS verifies the original host name (SNI and certificate) while the socket goes to the pinned address", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      expect((yield* sendTo(`https://bridge.test:${server.port}/`)).status).toBe(200)
      expect((yield* sendTo(`https://receiver.test:${server.port}/`)).status).toBe(200)
      expect(server.requests.map((r) => r.servername)).toEqual(["bridge.test", "receiver.test"])
      expect(server.requests.map((r) => r.headers.host)).toEqual([`bridge.test:${server.port}`, `receiver.test:${server.port}`])
    }).pipe(Effect.scoped, Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"] }))))

  it.live("Transport rule: a certificate issued for another name fails, although the address is the same", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const error = tlsFailure(yield* Effect.flip(sendTo(`https://evil.test:${server.port}/`)))
      expect(error.reason).toContain("ERR_TLS_CERT_ALTNAME_INVALID")
      expect(error.message).toBe(
        "Could not complete the exchange with evil.test: the TLS certificate is not valid for evil.test (ERR_TLS_CERT_ALTNAME_INVALID)."
      )
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped, Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"] }))))

  it.live("Transport rule: a certificate from an untrusted authority fails", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      // Egress trusts a different CA than the one that signed the server's certificate.
      const other = yield* Effect.orDie(Certificate.generateTlsMaterial())
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)).pipe(
        Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"], extraCa: other.ca }))
      )
      expect(tlsFailure(error).reason).toMatch(/not signed by a trusted authority/)
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("without the test CA, the loopback certificate is not trusted (Node's default store only)", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      tlsFailure(yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)))
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped, Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"], extraCa: [] }))))
  it.live("Transport rule \"verifiable certificate\": NODE_TLS_REJECT_UNAUTHORIZED=0 cannot switch verification off", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const saved = process.env.NODE_TLS_REJECT_UNAUTHORIZED
          process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0"
          return saved
        }),
        (saved) =>
          Effect.sync(() => {
            if (saved === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED
            else process.env.NODE_TLS_REJECT_UNAUTHORIZED = saved
          })
      )
      const untrusted = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/`)).pipe(
        Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"], extraCa: [] }))
      )
      tlsFailure(untrusted)
      const wrongName = yield* Effect.flip(sendTo(`https://evil.test:${server.port}/`)).pipe(
        Effect.provide(testEgress(dns, { allowPrivate: ["127.0.0.1/32"] }))
      )
      expect(tlsFailure(wrongName).reason).toContain("ERR_TLS_CERT_ALTNAME_INVALID")
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped))
})
