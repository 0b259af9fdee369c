/**
 * OAuth 2.0 client credentials (Authentication rule 3) over real TLS: the
 * exact token request, the token cache rules on the TestClock, the one fresh
 * grant and one replay after a bridge 401, and token endpoint failures.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Redacted, TestClock } from "effect"
import { connectionLayer } from "../src/BridgeClients.js"
import { BridgeClient } from "../src/BridgeClient.js"
import * as OAuthCredentials from "../src/OAuthCredentials.js"
import * as Harness from "./support/Harness.js"
import type { FakeBridgeState } from "./support/FakeBridge.js"
import { at, FakeBridge, TOKEN_PATH } from "./support/FakeBridge.js"
import * as Samples from "./support/Samples.js"

const bearerOf = (fake: FakeBridgeState, i: number) => fake.requests[i]!.headers["authorization"]

/** A client for a connection that differs from the default one as given. */
const clientFor = (change: (c: ReturnType<typeof Harness.connection>) => ReturnType<typeof Harness.connection>) =>
  Effect.gen(function*() {
    const fake = yield* FakeBridge
    const built = yield* Effect.scoped(
      Layer.build(connectionLayer(change(Harness.connection(fake, { transport: "rest", auth: "oauth" }))))
    )
    return Context.get(built, BridgeClient)
  })

layer(Harness.layer)("OAuthCredentials", (it) => {
  describe("token request", () => {
    it.effect("Authentication rule 3: a form POST with Basic auth of the form-encoded client ID and secret, the form content type, Accept JSON, and grant_type only", () =>
      Effect.gen(function*() {
        const { client, fake } = yield* Harness.client({ transport: "rest", auth: "oauth" })
        yield* client.capabilities()
        expect(fake.tokenRequests).toHaveLength(1)
        const grant = fake.tokenRequests[0]!
        expect(grant.method).toBe("POST")
        expect(grant.path).toBe(TOKEN_PATH)
        expect(grant.headers["content-type"]).toBe("application/x-www-form-urlencoded")
        expect(grant.headers["accept"]).toBe("application/json")
        const basic = String(grant.headers["authorization"]).replace(/^Basic /, "")
        // "crm relay:client" and "s3cret&p@ss word", each form-encoded before Basic encoding.
        expect(Buffer.from(basic, "base64").toString("utf8")).toBe("crm+relay%3Aclient:s3cret%26p%40ss+word")
        expect(grant.text).toBe("grant_type=client_credentials")
        expect(bearerOf(fake, 0)).toBe("Bearer tok-1")
      }))

    it.effect("Authentication rule 3: scope is sent only when configured, form-encoded", () =>
      Effect.gen(function*() {
        const { client, fake } = yield* Harness.client({ transport: "rest", auth: "oauth", scope: "crm.write contacts:rw" })
        yield* client.capabilities()
        expect(fake.tokenRequests[0]!.text).toBe("grant_type=client_credentials&scope=crm.write+contacts%3Arw")
      }))

    it("Authentication rule 3: the form encoding leaves only alphanumerics and *-._ unescaped", () => {
      expect(OAuthCredentials.formEncode("a b+c:d/e!'()~*-._")).toBe("a+b%2Bc%3Ad%2Fe%21%27%28%29%7E*-._")
      expect(OAuthCredentials.formEncode("é")).toBe("%C3%A9")
    })

    it.effect("Authentication rule 3: the token URL goes through the same egress — a token URL with a query string is refused at configuration time", () =>
      Effect.gen(function*() {
        const fake = yield* FakeBridge
        const error = yield* Effect.flip(
          clientFor((c) => c.auth.type === "oauth" ? { ...c, auth: { ...c.auth, tokenUrl: `${fake.tokenUrl}?tenant=1` } } : c)
        )
        expect(error).toMatchObject({ _tag: "InvalidConnection", field: "auth.token_url" })
      }))

    it("Credentials: secrets never appear in configuration refusals", () => {
      const refused = OAuthCredentials.validateSettings({
        tokenUrl: "https://auth.example/token",
        clientId: "id",
        clientSecret: Redacted.make("top\nsecret"),
        binding: { tenantId: "t", accountId: "a", endpoint: "rest https://b.example", configuration: "1" }
      })
      expect(Either.isLeft(refused)).toBe(true)
      expect(JSON.stringify(Either.getLeft(refused))).not.toContain("top")
    })
  })

  describe("token cache", () => {
    // [rule, expires_in, seconds the token is reused (0: a fresh grant every time)]
    const lifetimes: ReadonlyArray<readonly [string, number | undefined, number]> = [
      ["Authentication rule 3: an expires_in above 30 s is cached for min(expires_in, 300) − 30 s — 3600 s gives 270 s", 3600, 270],
      ["Authentication rule 3: expires_in 100 s is cached for 70 s", 100, 70],
      ["Authentication rule 3: expires_in 31 s is cached for 1 s only", 31, 1],
      ["Authentication rule 3: only an expires_in above 30 seconds is cached — 30 s means a fresh grant next time", 30, 0],
      ["Authentication rule 3: without a usable lifetime (no expires_in) a fresh grant is requested next time", undefined, 0]
    ]
    for (const [name, expiresIn, cachedFor] of lifetimes) {
      it.effect(name, () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport: "rest", auth: "oauth" })
          fake.defaultExpiresIn = expiresIn
          yield* client.capabilities()
          yield* client.capabilities()
          if (cachedFor === 0) {
            expect(fake.tokenRequests).toHaveLength(2)
            return
          }
          expect(fake.tokenRequests).toHaveLength(1)
          yield* TestClock.adjust(`${cachedFor - 1} seconds`)
          yield* client.capabilities()
          expect(fake.tokenRequests).toHaveLength(1)
          yield* TestClock.adjust("1 second")
          yield* client.capabilities()
          expect(fake.tokenRequests).toHaveLength(2)
          expect(fake.requests.map((r) => r.headers["authorization"])).toEqual([
            "Bearer tok-1",
            "Bearer tok-1",
            "Bearer tok-1",
            "Bearer tok-2"
          ])
        }))
    }

    it.effect("Authentication rule 3: the cache is bound to tenant, account, endpoint, configuration and credentials — clients of the same connection share it, others do not", () =>
      Effect.gen(function*() {
        const { fake } = yield* Harness.client({ transport: "rest", auth: "oauth" })
        const same1 = yield* clientFor((c) => c)
        const same2 = yield* clientFor((c) => c)
        yield* same1.capabilities()
        yield* same2.capabilities()
        expect(fake.tokenRequests).toHaveLength(1)
        const variants = [
          (c: ReturnType<typeof Harness.connection>) => ({ ...c, tenantId: "tenant-2" }),
          (c: ReturnType<typeof Harness.connection>) => ({ ...c, accountId: "account-2" }),
          (c: ReturnType<typeof Harness.connection>) => ({ ...c, version: 2 }),
          (c: ReturnType<typeof Harness.connection>) => ({ ...c, transport: { kind: "mcp", url: fake.mcpUrl } }),
          (c: ReturnType<typeof Harness.connection>) =>
            c.auth.type === "oauth" ? { ...c, auth: { ...c.auth, scope: "crm.write" } } : c,
          (c: ReturnType<typeof Harness.connection>) =>
            c.auth.type === "oauth" ? { ...c, auth: { ...c.auth, clientSecret: Redacted.make("another secret") } } : c
        ]
        for (const variant of variants) {
          const other = yield* clientFor(variant)
          yield* other.capabilities()
        }
        expect(fake.tokenRequests).toHaveLength(1 + variants.length)
      }))

    it("Authentication rule 3: the cache key is a digest — it holds no secret and changes with the secret", () => {
      const settings = {
        tokenUrl: "https://auth.example/token",
        clientId: "id",
        clientSecret: Redacted.make("hunter2-secret"),
        binding: { tenantId: "t", accountId: "a", endpoint: "rest https://b.example", configuration: "1" }
      }
      const key = OAuthCredentials.cacheKey(settings)
      expect(key).toMatch(/^[0-9a-f]{64}$/)
      expect(key).not.toContain("hunter2")
      expect(OAuthCredentials.cacheKey({ ...settings, clientSecret: Redacted.make("other") })).not.toBe(key)
    })
  })

  for (const transport of Harness.TRANSPORTS) {
    describe(`bridge 401 over ${transport}`, () => {
      it.effect("Authentication rule 3: a bridge 401 causes one fresh grant and one replay of the same request", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport, auth: "oauth" })
          yield* client.capabilities()
          // The bridge stops accepting the cached token.
          fake.accepted.delete("tok-1")
          const receipt = yield* client.leadsCreate(Samples.lead)
          expect(receipt).toEqual({ id: "lead-1" })
          // capabilities, the refused lead, the replayed lead.
          expect(fake.requests).toHaveLength(3)
          expect(fake.tokenRequests).toHaveLength(2)
          const [refused, replayed] = [fake.requests[1]!, fake.requests[2]!]
          expect(refused.headers["authorization"]).toBe("Bearer tok-1")
          expect(replayed.headers["authorization"]).toBe("Bearer tok-2")
          expect(replayed.headers["idempotency-key"]).toBe(refused.headers["idempotency-key"])
          const args = (r: typeof refused) => (transport === "rest" ? r.json : at(r.json, "params", "arguments"))
          expect(args(replayed)).toEqual(args(refused))
        }))

      it.effect("Authentication rule 3: a second 401 stops — Auth, after exactly one fresh grant and one replay", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport, auth: "oauth" })
          fake.scripts.push({ raw: { status: 401 } }, { raw: { status: 401 } }, { raw: { status: 401 } })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Auth", status: 401, operation: "contacts.upsert" })
          expect(fake.requests).toHaveLength(2)
          expect(fake.tokenRequests).toHaveLength(2)
        }))

      it.effect("Authentication rule 2: an API-key 401 is never replayed — Auth after exactly one request", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport, auth: "api_key" })
          fake.scripts.push({ raw: { status: 401 } }, { raw: { status: 401 } })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Auth", status: 401 })
          expect(fake.requests).toHaveLength(1)
          expect(fake.tokenRequests).toHaveLength(0)
        }))
    })
  }

  describe("token endpoint failures", () => {
    const cases: ReadonlyArray<readonly [string, { status: number; headers?: Record<string, string>; body?: string }, Record<string, unknown>]> = [
      ["Errors: a token endpoint 503 is Transient", { status: 503, headers: { "retry-after": "20" } }, { _tag: "Transient", status: 503 }],
      ["Errors: a token endpoint 429 is Transient", { status: 429 }, { _tag: "Transient", status: 429 }],
      ["Errors: a token endpoint 400 (invalid_client) is Permanent", { status: 400, body: "{\"error\":\"invalid_client\"}" }, { _tag: "Permanent", kind: "rejected", status: 400 }],
      ["Errors: a token endpoint 401 is Auth", { status: 401 }, { _tag: "Auth", status: 401 }],
      ["Errors: a token endpoint redirect is Permanent and not followed", { status: 302, headers: { location: "https://bridge.localhost/elsewhere" } }, { _tag: "Permanent", kind: "redirect" }],
      ["Authentication rule 3: token_type must be \"Bearer\"", { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ access_token: "t", token_type: "mac", expires_in: 3600 }) }, { _tag: "Permanent", kind: "invalid_receipt" }],
      ["Authentication rule 3: a token response without access_token is invalid", { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ token_type: "Bearer" }) }, { _tag: "Permanent", kind: "invalid_receipt" }],
      ["Errors: a token response that is not JSON is Permanent", { status: 200, headers: { "content-type": "application/json" }, body: "access_token=t" }, { _tag: "Permanent", kind: "malformed_json" }]
    ]
    for (const [name, raw, expected] of cases) {
      it.effect(`${name} — and nothing reaches the bridge`, () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport: "rest", auth: "oauth" })
          fake.tokenScripts.push({ raw })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ ...expected, operation: "leads.create" })
          expect(error.message).toContain("token endpoint")
          expect(error.message).not.toContain("invalid_client")
          expect(fake.requests).toHaveLength(0)
        }))
    }

    it.effect("Authentication rule 3: token_type is case-insensitive (RFC 6749) — \"bearer\" is accepted", () =>
      Effect.gen(function*() {
        const { client, fake } = yield* Harness.client({ transport: "rest", auth: "oauth" })
        fake.accepted.add("lower-case-token")
        fake.tokenScripts.push({
          raw: { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ access_token: "lower-case-token", token_type: "bearer" }) }
        })
        yield* client.capabilities()
        expect(bearerOf(fake, 0)).toBe("Bearer lower-case-token")
      }))
  })
})
