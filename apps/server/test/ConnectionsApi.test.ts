import { describe, expect, layer } from "@effect/vitest"
import { Operations } from "@crm-relay/contract"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { TestDatabase, Vault } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as S from "./support/ConnectionsServer.js"
import { adminRequest, layerServer, replica, start } from "./support/TestServer.js"

const ALL_OPERATIONS = { contract_version: "svc.crm.v1", operations: [...Operations.OPERATIONS], booking_closes_availability: true }

const put = (accountId: string, tenantId: string, body: unknown) =>
  S.admin("PUT", `/v1/accounts/${accountId}/connections/${encodeURIComponent(tenantId)}`, body)

layer(S.Live)("connections on the internal API", (it) => {
  for (const transport of ["rest", "mcp"] as const) {
    for (const auth of ["api_key", "oauth"] as const) {
      it.effect(`What the service does: PUT /v1/accounts/{id}/connections/{tenantId} over ${transport} with ${auth} runs the capabilities check only and answers 200 {capabilities}; the bridge saw one capabilities request and no write`, () =>
        Effect.gen(function*() {
          const bridge = yield* ReferenceBridge.ReferenceBridge
          const id = yield* S.account("live")
          const mark = yield* S.mark
          const answer = yield* put(id, S.TENANT.tenantId, S.form(bridge, transport, auth))
          expect([answer.status, answer.json]).toEqual([200, { capabilities: ALL_OPERATIONS }])
          const received = yield* S.bridgeRequestsSince(mark)
          expect(received.map((r) => [r.transport, r.operation, r.tenantId])).toEqual([[transport, "capabilities", S.TENANT.tenantId]])
          expect(received.every((r) => r.idempotencyKey === undefined)).toBe(true)

          // Stored: the connection (no secret in the answer) and the capabilities.
          const stored = yield* S.admin("GET", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`)
          expect(stored.status).toBe(200)
          expect(stored.json).toMatchObject({
            account_id: id,
            tenant_id: S.TENANT.tenantId,
            transport,
            url: transport === "rest" ? bridge.restBaseUrl : bridge.mcpUrl,
            version: 1,
            auth: auth === "api_key" ? { type: "api_key" } : { type: "oauth", token_url: bridge.tokenUrl, client_id: S.TENANT.clientId },
            capabilities: ALL_OPERATIONS
          })
          expect(stored.text).not.toContain(auth === "api_key" ? S.TENANT.apiKey : S.TENANT.clientSecret)
        }))
    }
  }

  it.effect("Demo and sandbox accounts cannot connect this bridge to a real CRM: 409 with the Error object, no bridge traffic, nothing stored", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const mark = yield* S.mark
      for (const mode of ["demo", "sandbox"] as const) {
        const id = yield* S.account(mode)
        const answer = yield* put(id, S.TENANT.tenantId, S.form(bridge, "rest", "api_key"))
        expect([answer.status, answer.json]).toEqual([
          409,
          { error: `Demo and sandbox accounts cannot connect a bridge to a real CRM; this account's mode is ${mode}.` }
        ])
        const test = yield* S.admin("POST", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}/test`)
        expect(test.status).toBe(409)
        expect((yield* S.admin("GET", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`)).status).toBe(404)
      }
      expect(yield* S.bridgeRequestsSince(mark)).toEqual([])
    }))

  it.effect("a bad URL or key is refused with 400 naming the connection-form field; nothing is sent or stored", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* S.account("live")
      const mark = yield* S.mark
      const good = S.form(bridge, "rest", "api_key")
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...good, url: bridge.restBaseUrl.replace("https:", "http:") }, "url"],
        [{ ...good, url: `${bridge.restBaseUrl}?x=1` }, "url"],
        [{ ...good, transport: "grpc" }, "transport"],
        [{ ...good, auth: { type: "api_key", key: "with space" } }, "auth.key"],
        [{ ...good, auth: { type: "oauth", token_url: "http://x/token", client_id: "c", client_secret: "s" } }, "auth.token_url"],
        [{ ...good, auth: { type: "oauth", token_url: bridge.tokenUrl, client_id: "", client_secret: "s" } }, "auth.client_id"]
      ]
      for (const [body, field] of cases) {
        const answer = yield* put(id, S.TENANT.tenantId, body)
        expect(answer.status).toBe(400)
        expect(answer.json).toMatchObject({ field })
        expect(typeof (answer.json as { error: string }).error).toBe("string")
      }
      // A body of the wrong shape is 400 naming the field too.
      const missing = yield* put(id, S.TENANT.tenantId, { transport: "rest", url: bridge.restBaseUrl })
      expect([missing.status, missing.json]).toEqual([400, { error: "auth is required." }])
      const notJson = yield* put(id, S.TENANT.tenantId, "{")
      expect(notJson.status).toBe(400)
      expect(yield* S.bridgeRequestsSince(mark)).toEqual([])
      expect((yield* S.admin("GET", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`)).status).toBe(404)
      const unknown = yield* put("0f8fad5b-d9cb-469f-a165-70867728950e", S.TENANT.tenantId, good)
      expect([unknown.status, unknown.json]).toEqual([404, { error: "No account with this id exists." }])
    }))

  it.effect("a failed check stores nothing: unreachable bridge → 502, refused credential or invalid capabilities → 422", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* S.account("live")
      const good = S.form(bridge, "rest", "api_key")
      const unreachable = yield* put(id, S.TENANT.tenantId, { ...good, url: `https://${S.HOST}:1/crm` })
      expect(unreachable.status).toBe(502)
      expect((unreachable.json as { error: string }).error).toContain("The capabilities check did not pass")
      const wrongKey = yield* put(id, S.TENANT.tenantId, { ...good, auth: { type: "api_key", key: "wrong-key" } })
      expect(wrongKey.status).toBe(422)
      expect(wrongKey.text).not.toContain("wrong-key")
      yield* bridge.control.setFault(Faults.invalidReceipt("unknown_contract_version"), { operation: "capabilities" })
      expect((yield* put(id, S.TENANT.tenantId, good)).status).toBe(422)
      yield* bridge.control.setFault(Faults.status(503), { operation: "capabilities" })
      expect((yield* put(id, S.TENANT.tenantId, good)).status).toBe(502)
      expect((yield* S.admin("GET", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`)).status).toBe(404)
    }))

  it.effect("an unreachable bridge is named: refused port, unknown host and the address policy each say which and what to do next, never \"The connection to the bridge failed.\"", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* S.account("live")
      const good = S.form(bridge, "rest", "api_key")
      const cases: ReadonlyArray<readonly [string, number, ReadonlyArray<string>]> = [
        [`https://${S.HOST}:1/crm`, 502, [`The bridge at ${S.HOST}:1 refused the connection (ECONNREFUSED)`, "Check that the bridge is running"]],
        ["https://nowhere.localhost/crm", 502, ["The host name nowhere.localhost of the bridge was not found in DNS (ENOTFOUND)", "Check the URL's host name"]],
        ["https://private.localhost/crm", 422, ["resolves to 10.20.30.40, which is in the private-use (RFC 1918) range 10.0.0.0/8", "EGRESS_ALLOW_PRIVATE"]]
      ]
      for (const [url, status, says] of cases) {
        const answer = yield* put(id, S.TENANT.tenantId, { ...good, url })
        expect(answer.status).toBe(status)
        const error = (answer.json as { error: string }).error
        for (const text of says) expect(error).toContain(text)
        expect(error).not.toContain("The connection to the bridge failed.")
      }
      expect((yield* S.admin("GET", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`)).status).toBe(404)
    }))

  it.effect("connections test: POST .../test re-runs the capabilities check on the stored connection (404 when there is none)", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* S.account("live")
      const none = yield* S.admin("POST", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}/test`)
      expect([none.status, none.json]).toEqual([404, { error: "Tenant t-1 has no bridge connection; set one first." }])
      expect((yield* put(id, S.TENANT.tenantId, S.form(bridge, "mcp", "oauth"))).status).toBe(200)
      const mark = yield* S.mark
      const test = yield* S.admin("POST", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}/test`)
      expect([test.status, test.json]).toEqual([200, { capabilities: ALL_OPERATIONS }])
      expect((yield* S.bridgeRequestsSince(mark)).map((r) => r.operation)).toEqual(["capabilities"])
    }))

  it.effect("Delivery signing: GET /v1/accounts/{id}/signing-secret → {secret: \"whsec_…\"}, the same each time; unknown account → 404", () =>
    Effect.gen(function*() {
      const id = yield* S.account("live")
      const first = yield* S.admin("GET", `/v1/accounts/${id}/signing-secret`)
      expect(first.status).toBe(200)
      const secret = (first.json as { secret: string }).secret
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
      expect((yield* S.admin("GET", `/v1/accounts/${id}/signing-secret`)).json).toEqual({ secret })
      expect((yield* S.admin("GET", "/v1/accounts/0f8fad5b-d9cb-469f-a165-70867728950e/signing-secret")).status).toBe(404)
      expect((yield* S.admin("GET", "/v1/accounts/nope/signing-secret")).status).toBe(404)
    }))

  it.effect("the internal API needs the admin token for every connection, secret and rotation route", () =>
    Effect.gen(function*() {
      const base = yield* S.adminUrl
      for (const [method, path] of [
        ["PUT", "/v1/accounts/x/connections/t-1"],
        ["POST", "/v1/accounts/x/connections/t-1/test"],
        ["GET", "/v1/accounts/x/connections/t-1"],
        ["GET", "/v1/accounts/x/signing-secret"],
        ["POST", "/v1/master-key/rotate"],
        ["POST", "/v1/accounts/x/tenants/t-1/contacts/search"]
      ] as const) {
        const answer = yield* Effect.promise(() => fetch(`${base}${path}`, { method, headers: { "content-type": "application/json" }, body: method === "GET" ? null : "{}" }))
        expect(answer.status).toBe(401)
      }
    }))

  describe("master-key rotate", () => {
    it.effect("POST /v1/master-key/rotate re-encrypts every secret under a new key and every connection keeps working", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const id = yield* S.account("live")
        expect((yield* put(id, S.TENANT.tenantId, S.form(bridge, "rest", "oauth"))).status).toBe(200)
        const secret = (yield* S.admin("GET", `/v1/accounts/${id}/signing-secret`)).json
        const rotated = yield* S.admin("POST", "/v1/master-key/rotate")
        expect(rotated.status).toBe(200)
        const report = rotated.json as { key_id: string; master_key_id: string; resealed: number; undecryptable: Array<string>; deleted_keys: Array<string> }
        expect(report.master_key_id).toBe(S.masterKeys.current.id)
        expect(report.resealed).toBeGreaterThanOrEqual(2)
        expect(report.undecryptable).toEqual([])
        expect(report.deleted_keys.length).toBeGreaterThanOrEqual(1)
        const test = yield* S.admin("POST", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}/test`)
        expect(test.status).toBe(200)
        expect((yield* S.admin("GET", `/v1/accounts/${id}/signing-secret`)).json).toEqual(secret)
      }))
  })

  it.effect("secrets never appear in logs or answers: no API key or client secret in any log line or answer of this suite", () =>
    Effect.gen(function*() {
      expect(S.logLines.length).toBeGreaterThan(0)
      expect(S.logLines.some((line) => line.includes("Bridge connection stored"))).toBe(true)
      const everything = [...S.logLines, ...S.answers].join("\n")
      for (const secret of [S.TENANT.apiKey, S.TENANT.clientSecret, "wrong-key", "with space"]) {
        expect(everything).not.toContain(secret)
      }
    }))
})

layer(TestDatabase.layer, { excludeTestServices: true })("master-key rotate with keys that do not open the data", (it) => {
  it.scoped("POST /v1/master-key/rotate answers 409 with the Error object when a stored data key does not open under this server's master keys; nothing changes", () =>
    Effect.gen(function*() {
      const server = yield* start(yield* replica(layerServer({ masterKeys: Vault.randomMasterKeys() })))
      const id = ((yield* adminRequest(server.admin, "POST", "/v1/accounts", { name: "Keys" })).json as { id: string }).id
      const secret = yield* adminRequest(server.admin, "GET", `/v1/accounts/${id}/signing-secret`)
      expect(secret.status).toBe(200)
      // A data key wrapped only under a master key this server was never given (a replica's, say), with a
      // secret sealed under it. A server cannot start beside such a key (the integration keys' tag secret
      // is opened at start), so it is written here, as another replica would have.
      const sql = yield* SqlClient.SqlClient
      const foreign = crypto.randomUUID()
      yield* sql`INSERT INTO vault_keys (id, state) VALUES (${foreign}, 'retired')`
      yield* sql`INSERT INTO vault_key_wraps (key_id, master_key_id, wrapped) VALUES (${foreign}, 'ffffffffffffffff', ${new Uint8Array(60)})`
      yield* sql`INSERT INTO vault_secrets (key_id, aad, ciphertext) VALUES (${foreign}, 'test/foreign', ${new Uint8Array(44)})`
      const refused = yield* adminRequest(server.admin, "POST", "/v1/master-key/rotate")
      expect(refused.status).toBe(409)
      expect(Object.keys(refused.json as object)).toEqual(["error"])
      expect((refused.json as { error: string }).error).toMatch(new RegExp(`^Data key ${foreign} is wrapped under master key`))
      expect((yield* adminRequest(server.admin, "GET", `/v1/accounts/${id}/signing-secret`)).json).toEqual(secret.json)
      const [keys] = yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM vault_keys WHERE state = 'active'`
      expect(keys?.n).toBe(1)
    }))
})
