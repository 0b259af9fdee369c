import { Certificate } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import * as net from "node:net"
import { BridgeClient } from "../src/BridgeClient.js"
import { connectionLayer } from "../src/BridgeClients.js"
import type { FailureReason } from "../src/BridgeError.js"
import type { EgressOptions } from "../src/Egress.js"
import { TokenCache } from "../src/TokenCache.js"
import { TransportRegistry } from "../src/TransportRegistry.js"
import { type Handler, httpsServer, LOOPBACK_DNS, ok, silentListener, testEgress } from "./support/egressServers.js"

// Remote text that must never reach a message.
const REMOTE_SECRET = "remote-body-secret-7f3a"

const DNS = { ...LOOPBACK_DNS, "evil.test": ["127.0.0.1"] }
const LOOPBACK = { allowPrivate: ["127.0.0.1/32"] }

/** Runs the capabilities check of a REST connection at `url` through egress with `options`; returns its failure. */
const checkFails = (url: string, options: EgressOptions = LOOPBACK) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      connectionLayer({
        accountId: "account-1",
        tenantId: "tenant-1",
        version: 1,
        transport: { kind: "rest", url },
        auth: { type: "api_key", key: Redacted.make("key-1") }
      }).pipe(Layer.provide(Layer.mergeAll(testEgress(DNS, options), TokenCache.Default, TransportRegistry.Default)))
    )
    return yield* Effect.flip(Context.get(context, BridgeClient).capabilities())
  }).pipe(Effect.scoped, Effect.orDie)

/** The failure names its cause, carries the typed reason and a next step, and never quotes the remote. */
const expectCause = (
  error: { readonly _tag: string; readonly message: string; readonly diagnosis?: { reason: FailureReason; nextStep: string } },
  tag: "Transient" | "Permanent",
  reason: FailureReason,
  says: RegExp
) => {
  expect(error._tag).toBe(tag)
  expect(error.diagnosis?.reason).toBe(reason)
  expect(error.message).toMatch(says)
  expect(error.message.endsWith(error.diagnosis?.nextStep ?? "(no next step)")).toBe(true)
  expect(error.message).not.toContain(REMOTE_SECRET)
  expect(error.message).not.toBe("The connection to the bridge failed.")
}

/** A loopback port nothing listens on: bound, then released. */
const freePort = Effect.async<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

const answer = (status: number, headers: Record<string, string>, body: string | Buffer): Handler => (_, res) => {
  res.writeHead(status, headers)
  res.end(body)
}

describe("a failed exchange with a bridge says which failure it was and the next step", () => {
  it.live("a refused port: connection refused, check that the bridge runs on that port", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const error = yield* checkFails(`https://bridge.test:${port}/crm`)
      expectCause(error, "Transient", "connection_refused", new RegExp(`bridge at bridge\\.test:${port} refused the connection`))
      expect(error.message).toMatch(/Check that the bridge is running/)
    }))

  it.live("an unknown host (the test resolver answers NXDOMAIN): DNS name not found, check the host name", () =>
    Effect.gen(function*() {
      const error = yield* checkFails("https://missing.test/crm")
      expectCause(error, "Transient", "dns_not_found", /host name missing\.test of the bridge was not found in DNS \(ENOTFOUND\)/)
      expect(error.message).toMatch(/Check the URL's host name/)
    }))

  it.live("an untrusted certificate: not signed by a trusted authority, with how to trust a local test bridge", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const other = yield* Effect.orDie(Certificate.generateTlsMaterial())
      const error = yield* checkFails(`https://bridge.test:${server.port}/crm`, { ...LOOPBACK, extraCa: other.ca })
      expectCause(error, "Transient", "tls_untrusted", /certificate of the bridge at bridge\.test:\d+ is not signed by a trusted authority/)
      expect(error.message).toMatch(/NODE_EXTRA_CA_CERTS/)
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("a certificate for other names: name mismatch, use the certificate's host name", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const error = yield* checkFails(`https://evil.test:${server.port}/crm`)
      expectCause(error, "Transient", "tls_name_mismatch", /is not issued for the name evil\.test \(ERR_TLS_CERT_ALTNAME_INVALID\)/)
      expect(server.requests).toHaveLength(0)
    }).pipe(Effect.scoped))

  it.live("an expired certificate: expired, renew the bridge's certificate", () =>
    Effect.gen(function*() {
      const ca = yield* Effect.orDie(Certificate.generateAuthority())
      const day = 24 * 60 * 60 * 1000
      const expired = yield* Effect.orDie(Certificate.issue(
        ca,
        { dnsNames: ["bridge.test"], ips: ["127.0.0.1"] },
        { notBefore: new Date(Date.now() - 10 * day), notAfter: new Date(Date.now() - day) }
      ))
      const server = yield* httpsServer(ok, { cert: expired })
      const error = yield* checkFails(`https://bridge.test:${server.port}/crm`, { ...LOOPBACK, extraCa: ca.cert })
      expectCause(error, "Transient", "tls_expired", /has expired or is not yet valid \(CERT_HAS_EXPIRED\)/)
      expect(error.message).toMatch(/Renew the bridge's certificate/)
    }).pipe(Effect.scoped))

  it.live("a redirect: not followed, put the final URL in the connection (the Location is not shown)", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(
        answer(302, { location: `https://bridge.test/${REMOTE_SECRET}`, "content-type": "text/plain" }, REMOTE_SECRET)
      )
      const error = yield* checkFails(`https://bridge.test:${server.port}/crm`)
      expectCause(error, "Permanent", "redirect", /answered a 302 redirect, which is not followed/)
      expect(error).toMatchObject({ kind: "redirect", status: 302 })
    }).pipe(Effect.scoped))

  it.live("an oversized answer: over the 1 MiB limit, not read further", () =>
    Effect.gen(function*() {
      const body = Buffer.alloc(2 * 1024 * 1024, `${REMOTE_SECRET} `)
      const server = yield* httpsServer(answer(200, { "content-type": "application/json" }, body))
      const error = yield* checkFails(`https://bridge.test:${server.port}/crm`)
      expectCause(error, "Permanent", "response_too_large", /exceeded the 1 MiB limit/)
    }).pipe(Effect.scoped))

  it.live("the address policy: refused, naming the address, its range and how a local test bridge is allowed", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const error = yield* checkFails(`https://bridge.test:${server.port}/crm`, { allowPrivate: [] })
      expectCause(error, "Permanent", "address_refused", /bridge\.test resolves to 127\.0\.0\.1, which is in the loopback range 127\.0\.0\.0\/8/)
      expect(error.message).toMatch(/EGRESS_ALLOW_PRIVATE/)
      expect(server.connections()).toBe(0)
    }).pipe(Effect.scoped))

  it.live("a bridge that never answers: timed out at the deadline", () =>
    Effect.gen(function*() {
      const listener = yield* silentListener()
      const error = yield* checkFails(`https://bridge.test:${listener.port}/crm`, { ...LOOPBACK, deadline: "500 millis" })
      expectCause(error, "Transient", "timeout", /bridge\.test:\d+ (ran past its 0\.5 s deadline|timed out)/)
    }).pipe(Effect.scoped))
})
