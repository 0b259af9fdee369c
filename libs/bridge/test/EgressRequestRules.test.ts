import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Egress, type EgressRefused, type EgressRequest, MAX_BODY_BYTES } from "../src/Egress.js"
import { expectOneSentence } from "./support/egressAssertions.js"
import { httpsServer, LOOPBACK_DNS, ok, type TestServer, testEgress } from "./support/egressServers.js"

const egressLayer = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] })

const refusal = (request: EgressRequest) =>
  Effect.flatMap(Egress, (egress) => Effect.flip(egress.send(request))).pipe(
    Effect.map((error) => {
      expect(error._tag).toBe("EgressRefused")
      expectOneSentence(error.message)
      return error as EgressRefused
    })
  )

const expectUntouched = (server: TestServer) => {
  expect(server.connections()).toBe(0)
  expect(server.requests).toHaveLength(0)
}

describe("Egress request rules", () => {
  it.live("Transport rule \"public HTTPS\": an http:// URL is refused before any connection", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const error = yield* refusal({ method: "POST", url: `http://bridge.test:${server.port}/capabilities` })
      expect(error.reason).toBe("not_https")
      expect(error.host).toBe("bridge.test")
      expect(error.message).toBe("The URL for bridge.test uses http://; only https:// URLs are allowed.")
      const other = yield* refusal({ method: "POST", url: "ftp://bridge.test/capabilities" })
      expect(other.reason).toBe("not_https")
      expectUntouched(server)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("a URL that does not parse is refused as invalid", () =>
    Effect.gen(function*() {
      const error = yield* refusal({ method: "POST", url: "bridge.test/capabilities" })
      expect(error.reason).toBe("invalid_url")
      expect(error.message).toBe("The outbound URL is not a valid absolute URL.")
    }).pipe(Effect.provide(egressLayer)))

  it.live("Authentication rule 1: credentials are never placed in the endpoint URL (userinfo is refused)", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      for (const userinfo of ["user:secret@", "user@", ":secret@"]) {
        const error = yield* refusal({ method: "POST", url: `https://${userinfo}bridge.test:${server.port}/capabilities` })
        expect(error.reason).toBe("url_credentials")
        // The message names the host but never repeats the credentials.
        expect(error.message).not.toContain("secret")
        expect(JSON.stringify(error)).not.toContain("secret")
      }
      expectUntouched(server)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Transport rule: query strings and fragments are unsupported for bridge URLs", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const base = `https://bridge.test:${server.port}/capabilities`
      const cases = [
        [`${base}?tenant=t1`, "query string"],
        [`${base}?`, "query string"],
        [`${base}#section`, "fragment"],
        [`${base}#`, "fragment"],
        [`${base}?a=1#b`, "query string and fragment"]
      ] as const
      for (const [url, detail] of cases) {
        const error = yield* refusal({ method: "POST", url })
        expect(error.reason).toBe("query_or_fragment")
        expect(error.detail).toBe(detail)
      }
      // The default is the bridge rule; saying so explicitly changes nothing.
      const explicit = yield* refusal({ method: "POST", url: `${base}?a=1`, options: { allowQuery: false } })
      expect(explicit.reason).toBe("query_or_fragment")
      expectUntouched(server)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("a webhook receiver URL may carry a query string when the call allows it; the fragment is never sent", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const egress = yield* Egress
      const response = yield* egress.send({
        method: "POST",
        url: `https://receiver.test:${server.port}/hooks/in?token=abc&x=1#frag`,
        body: "{}",
        options: { allowQuery: true, purpose: "webhook" }
      })
      expect(response.status).toBe(200)
      expect(server.requests[0]?.url).toBe("/hooks/in?token=abc&x=1")
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: a request body over 1 MiB is refused before anything is sent", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const url = `https://bridge.test:${server.port}/leads`
      const bytes = yield* refusal({ method: "POST", url, body: new Uint8Array(MAX_BODY_BYTES + 1) })
      expect(bytes.reason).toBe("request_too_large")
      expect(bytes.message).toBe(
        "The request body for bridge.test is 1048577 bytes, over the 1048576-byte (1 MiB) limit."
      )
      // A string is measured in UTF-8 bytes, not characters: 524289 two-byte characters.
      const text = yield* refusal({ method: "POST", url, body: "é".repeat(MAX_BODY_BYTES / 2 + 1) })
      expect(text.reason).toBe("request_too_large")
      expectUntouched(server)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: a request body of exactly 1 MiB is sent whole", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const egress = yield* Egress
      const body = new Uint8Array(MAX_BODY_BYTES).fill(0x61)
      const response = yield* egress.send({ method: "POST", url: `https://bridge.test:${server.port}/leads`, body })
      expect(response.status).toBe(200)
      expect(server.requests[0]?.body.byteLength).toBe(MAX_BODY_BYTES)
      expect(server.requests[0]?.headers["content-length"]).toBe(String(MAX_BODY_BYTES))
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("headers egress owns (Host picks the TLS name) cannot be set by the caller", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const url = `https://bridge.test:${server.port}/leads`
      for (const name of ["Host", "accept-encoding", "Content-Length", "transfer-encoding", "connection", "proxy-authorization"]) {
        const error = yield* refusal({ method: "POST", url, headers: { [name]: "x" } })
        expect(error.reason).toBe("invalid_request")
        expect(error.detail).toContain(name.toLowerCase())
      }
      const injected = yield* refusal({ method: "POST", url, headers: { "x-note": "a\r\nx-evil: 1" } })
      expect(injected.reason).toBe("invalid_request")
      const badName = yield* refusal({ method: "POST", url, headers: { "bad name": "1" } })
      expect(badName.reason).toBe("invalid_request")
      expectUntouched(server)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("a Redacted header value is sent as its value and never appears in a refusal", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const egress = yield* Egress
      yield* egress.send({
        method: "POST",
        url: `https://bridge.test:${server.port}/leads`,
        headers: { authorization: Redacted.make("Bearer k-123") }
      })
      expect(server.requests[0]?.headers.authorization).toBe("Bearer k-123")
      const error = yield* refusal({
        method: "POST",
        url: `http://bridge.test:${server.port}/leads`,
        headers: { authorization: Redacted.make("Bearer k-123") }
      })
      expect(JSON.stringify(error)).not.toContain("k-123")
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))
})
