/**
 * Authentication rules 1–4 against a real bridge: API keys, OAuth 2.0
 * client credentials with the bridge's own token endpoint, and tenant
 * binding, over both transports.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Faults from "../src/Faults.js"
import type { TransportName } from "./support/bridgeClient.js"
import { call } from "./support/bridgeClient.js"
import { bodies, CLIENT_A, KEY_A, KEY_B, TENANT_A, TENANT_B } from "./support/fixtures.js"
import * as H from "./support/https.js"
import { startBridge } from "./support/startBridge.js"

/** `Authorization: Basic` over the form-encoded client id and secret (RFC 6749 §2.3.1). */
const basic = (id: string, secret: string) => {
  const encode = (s: string) => encodeURIComponent(s).replace(/%20/g, "+")
  return `Basic ${Buffer.from(`${encode(id)}:${encode(secret)}`).toString("base64")}`
}

const tokenRequest = (
  bridge: { readonly tokenUrl: string },
  agent: Parameters<typeof H.send>[0],
  options: { readonly authorization?: string; readonly form?: string; readonly contentType?: string } = {}
) =>
  H.send(agent, "POST", bridge.tokenUrl, {
    headers: {
      "content-type": options.contentType ?? "application/x-www-form-urlencoded",
      accept: "application/json",
      ...(options.authorization === undefined ? {} : { authorization: options.authorization })
    },
    body: options.form ?? "grant_type=client_credentials"
  })

describe.each<TransportName>(["rest", "mcp"])("%s transport", (transport) => {
  it.scopedLive("Authentication rule 2: a valid API key is accepted as a Bearer credential", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const answer = yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: KEY_A })
      expect(answer.status).toBe(200)
    }))

  it.scopedLive("Authentication rule 1: a request without credentials, with an unknown key or another scheme is 401", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const none = yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: null })
      expect(none.status).toBe(401)
      expect(none.answer.headers["www-authenticate"]).toMatch(/^Bearer /)
      const unknown = yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: "not-a-key" })
      expect(unknown.status).toBe(401)
      const otherScheme = yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), {
        headers: { authorization: `Token ${KEY_A}` }
      })
      expect(otherScheme.status).toBe(401)
    }))

  it.scopedLive("Authentication rule 4: a credential of another tenant is rejected (401) and nothing is written", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const mismatch = yield* call(transport, bridge, agent, "contacts.upsert", bodies.upsert(undefined, undefined, TENANT_A), {
        credential: KEY_B
      })
      expect(mismatch.status).toBe(401)
      expect((yield* bridge.control.records).contacts).toHaveLength(0)
      const own = yield* call(transport, bridge, agent, "contacts.upsert", bodies.upsert(undefined, undefined, TENANT_B), {
        credential: KEY_B
      })
      expect(own.status).toBe(200)
      expect((yield* bridge.control.records).contacts.map((c) => c.tenantId)).toEqual([TENANT_B])
    }))

  it.scopedLive("Authentication rule 3: a client-credentials grant yields a Bearer token the bridge accepts for its tenant", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const grant = yield* tokenRequest(bridge, agent, { authorization: basic(CLIENT_A.clientId, CLIENT_A.clientSecret) })
      expect(grant.status).toBe(200)
      expect(grant.headers["cache-control"]).toBe("no-store")
      const token = grant.json as { access_token: string; token_type: string; expires_in: number }
      expect(token).toEqual({ access_token: expect.stringMatching(/^[\x21-\x7E]+$/), token_type: "Bearer", expires_in: 120 })
      const answer = yield* call(transport, bridge, agent, "contacts.upsert", bodies.upsert(), { credential: token.access_token })
      expect(answer.status).toBe(200)
      const [, used] = yield* bridge.control.received
      expect(used!.principal).toEqual({ kind: "oauth", tenantId: TENANT_A, clientId: CLIENT_A.clientId, grant: 1 })
      const mismatch = yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(TENANT_B), {
        credential: token.access_token
      })
      expect(mismatch.status).toBe(401)
      expect(yield* bridge.control.grants).toHaveLength(1)
    }))

  it.scopedLive("Authentication rule 3: a revoked or expired access token answers 401", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge({
        tenants: [{ tenantId: TENANT_A, oauth: [{ clientId: "short", clientSecret: "s", expiresIn: 1 }, { clientId: "long", clientSecret: "s" }] }]
      })
      const grant = (id: string) =>
        Effect.map(tokenRequest(bridge, agent, { authorization: basic(id, "s") }), (a) => (a.json as { access_token: string }).access_token)
      const long = yield* grant("long")
      expect((yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: long })).status).toBe(200)
      yield* bridge.control.revokeTokens
      expect((yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: long })).status).toBe(401)
      const short = yield* grant("short")
      expect((yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: short })).status).toBe(200)
      yield* Effect.sleep("1100 millis")
      expect((yield* call(transport, bridge, agent, "capabilities", bodies.capabilities(), { credential: short })).status).toBe(401)
    }))
})

describe("token endpoint", () => {
  it.scopedLive("Authentication rule 3: the form is grant_type=client_credentials with the optional scope; grants are counted", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const auth = basic(CLIENT_A.clientId, CLIENT_A.clientSecret)
      expect((yield* tokenRequest(bridge, agent, { authorization: auth })).status).toBe(200)
      const scoped = yield* tokenRequest(bridge, agent, { authorization: auth, form: "grant_type=client_credentials&scope=crm.write" })
      expect(scoped.status).toBe(200)
      const grants = yield* bridge.control.grants
      expect(grants.map((g) => [g.seq, g.clientId, g.tenantId, g.scope])).toEqual([
        [1, CLIENT_A.clientId, TENANT_A, undefined],
        [2, CLIENT_A.clientId, TENANT_A, "crm.write"]
      ])
      const received = yield* bridge.control.received
      expect(received.map((r) => [r.transport, r.operation, r.authorizationScheme, r.body])).toEqual([
        ["oauth", "oauth.token", "Basic", { grant_type: "client_credentials" }],
        ["oauth", "oauth.token", "Basic", { grant_type: "client_credentials", scope: "crm.write" }]
      ])
    }))

  it.scopedLive("Authentication rule 3: expires_in is configurable per client, or omitted", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge({
        tenants: [{
          tenantId: TENANT_A,
          oauth: [
            { clientId: "none", clientSecret: "s", expiresIn: "omit" },
            { clientId: "thirty", clientSecret: "s", expiresIn: 30 }
          ]
        }]
      })
      const none = yield* tokenRequest(bridge, agent, { authorization: basic("none", "s") })
      expect(Object.keys(none.json as object).sort()).toEqual(["access_token", "token_type"])
      const thirty = yield* tokenRequest(bridge, agent, { authorization: basic("thirty", "s") })
      expect((thirty.json as { expires_in: number }).expires_in).toBe(30)
      expect((yield* bridge.control.grants).map((g) => g.expiresIn)).toEqual([undefined, 30])
    }))

  it.scopedLive("refusals follow RFC 6749: invalid_client 401, unsupported_grant_type, invalid_scope, invalid_request 400", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const auth = basic(CLIENT_A.clientId, CLIENT_A.clientSecret)
      const wrongSecret = yield* tokenRequest(bridge, agent, { authorization: basic(CLIENT_A.clientId, "wrong") })
      expect([wrongSecret.status, (wrongSecret.json as { error: string }).error]).toEqual([401, "invalid_client"])
      expect(wrongSecret.headers["www-authenticate"]).toMatch(/^Basic /)
      // The id and secret must be form-encoded before Basic encoding; raw ones do not match this client.
      const raw = `Basic ${Buffer.from(`${CLIENT_A.clientId}:${CLIENT_A.clientSecret}`).toString("base64")}`
      expect((yield* tokenRequest(bridge, agent, { authorization: raw })).status).toBe(401)
      const noAuth = yield* tokenRequest(bridge, agent, { form: `grant_type=client_credentials&client_id=x&client_secret=y` })
      expect(noAuth.status).toBe(401)
      const grantType = yield* tokenRequest(bridge, agent, { authorization: auth, form: "grant_type=password" })
      expect([grantType.status, (grantType.json as { error: string }).error]).toEqual([400, "unsupported_grant_type"])
      const scope = yield* tokenRequest(bridge, agent, { authorization: auth, form: "grant_type=client_credentials&scope=admin" })
      expect([scope.status, (scope.json as { error: string }).error]).toEqual([400, "invalid_scope"])
      const json = yield* tokenRequest(bridge, agent, {
        authorization: auth,
        contentType: "application/json",
        form: JSON.stringify({ grant_type: "client_credentials" })
      })
      expect([json.status, (json.json as { error: string }).error]).toEqual([400, "invalid_request"])
      expect(yield* bridge.control.grants).toHaveLength(0)
      const received = yield* bridge.control.received
      expect((received[2]!.body as Record<string, string>)["client_secret"]).toBe("<redacted>")
    }))

  it.scopedLive("faults target the token endpoint only when asked: a default rule never hits it", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const auth = basic(CLIENT_A.clientId, CLIENT_A.clientSecret)
      yield* bridge.control.setFault(Faults.status(500))
      expect((yield* tokenRequest(bridge, agent, { authorization: auth })).status).toBe(200)
      yield* bridge.control.clearFaults
      yield* bridge.control.setFault(Faults.status(503, { retryAfter: 7 }), { transport: "oauth" })
      const failed = yield* tokenRequest(bridge, agent, { authorization: auth })
      expect([failed.status, failed.headers["retry-after"]]).toEqual([503, "7"])
      yield* bridge.control.setFault(Faults.invalidReceipt("token_type_not_bearer"), { operation: "oauth.token" })
      const mac = yield* tokenRequest(bridge, agent, { authorization: auth })
      expect((mac.json as { token_type: string }).token_type).toBe("mac")
      yield* bridge.control.setFault(Faults.invalidReceipt("missing_access_token"))
      const missing = yield* tokenRequest(bridge, agent, { authorization: auth })
      expect(missing.json).not.toHaveProperty("access_token")
    }))
})
