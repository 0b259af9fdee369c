/**
 * Optional bodies are optional: a POST or PUT that sends no body at all (no
 * Content-Length, or 0, and no Content-Type) on a route whose body has only
 * optional fields means that body's defaults, on the internal API and in the
 * Integrations area's API. Which routes those are is read from the contract.
 */
import { expect, layer } from "@effect/vitest"
import * as InternalApi from "@crm-relay/contract/InternalApi"
import * as PortalApi from "@crm-relay/contract/PortalApi"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { RawHttp } from "@crm-relay/testing"
import { Effect, Option, Schema } from "effect"
import * as S from "./support/ConnectionsServer.js"
import { accountWithKey, ADMIN_TOKEN, jsonWith, request, urls } from "./support/TestServer.js"

const CONTENT_TYPE = { error: "Content-Type must be application/json." }

/** `METHOD /path` of every endpoint of `api` with a body whose fields are all optional (it decodes `{}`). */
const optionalBodies = (api: { readonly groups: Record<string, { readonly endpoints: Record<string, unknown> }> }) =>
  Object.values(api.groups).flatMap((group) =>
    Object.values(group.endpoints).flatMap((endpoint) => {
      const { method, path, payloadSchema } = endpoint as {
        readonly method: string
        readonly path: string
        readonly payloadSchema: Option.Option<Schema.Schema<unknown, unknown, never>>
      }
      if (method === "GET" || Option.isNone(payloadSchema)) return []
      return Schema.decodeUnknownEither(payloadSchema.value)({})._tag === "Right" ? [`${method} ${path}`] : []
    })
  )

/** The reference bridge, its records cleared. */
const freshBridge = Effect.tap(ReferenceBridge.ReferenceBridge, (bridge) => bridge.control.reset)

/** A live account whose tenant t-1 is connected to the reference bridge over REST with an API key. */
const connected = Effect.gen(function*() {
  const bridge = yield* freshBridge
  const id = yield* S.account("live")
  expect((yield* S.admin("PUT", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`, S.form(bridge, "rest", "api_key"))).status).toBe(200)
  return { bridge, id }
})

/** An internal API request with the admin token and nothing else: no body, no Content-Type. */
const bare = (method: string, path: string) =>
  Effect.flatMap(S.adminUrl, (base) => request(method, `${base}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }))

layer(S.Live)("optional bodies", (it) => {
  it("the routes whose body is optional, read from the contract: five internal ones, none in the Integrations area", () => {
    expect(optionalBodies(InternalApi.InternalApi)).toEqual([
      "PUT /v1/accounts/:id/routing",
      "POST /v1/accounts/:id/connections/:tenantId/check",
      "POST /v1/accounts/:id/tenants/:tenantId/contacts/search",
      "POST /v1/accounts/:id/subscriptions/:subscriptionId/disable",
      "POST /v1/accounts/:id/destinations/:destinationId/disable"
    ])
    expect(optionalBodies(PortalApi.PortalApi)).toEqual([])
  })

  it.effect("POST /v1/accounts/{id}/connections/{tenantId}/check without a body: \"writes\" is optional — the read-only check runs, with or without Content-Length: 0", () =>
    Effect.gen(function*() {
      const { bridge, id } = yield* connected
      const path = `/v1/accounts/${id}/connections/${S.TENANT.tenantId}/check`
      const zeroLength = yield* bare("POST", path)
      expect([zeroLength.status, zeroLength.json]).toMatchObject([200, { passed: true, requested_level: "read-only", earned_level: "read-only" }])
      // No Content-Length at all.
      const port = Number(new URL(yield* S.adminUrl).port)
      const raw = yield* Effect.promise(() =>
        RawHttp.exchange(port, RawHttp.format("POST", path, [["Host", "relay.test"], ["Authorization", `Bearer ${ADMIN_TOKEN}`]]), { expect: 1, timeoutMillis: 60_000 })
      )
      expect([raw.answers[0]?.status, JSON.parse(raw.answers[0]?.body ?? "null")]).toMatchObject([200, { passed: true, requested_level: "read-only" }])
      const records = yield* bridge.control.records
      expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])
    }))

  it.effect("PUT /v1/accounts/{id}/routing without a body: \"each field optional, the others kept\" — the rules are unchanged", () =>
    Effect.gen(function*() {
      const id = yield* S.account("live")
      const set = yield* S.admin("PUT", `/v1/accounts/${id}/routing`, { crm_push: false })
      expect(set.status).toBe(200)
      const unchanged = yield* bare("PUT", `/v1/accounts/${id}/routing`)
      expect([unchanged.status, unchanged.json]).toEqual([200, set.json])
      expect((yield* S.admin("GET", `/v1/accounts/${id}/routing`)).json).toEqual(set.json)
    }))

  it.effect("POST .../tenants/{tenantId}/contacts/search without a body answers as its defaults (`{}`: phone and email \"\") do", () =>
    Effect.gen(function*() {
      const { id } = yield* connected
      const path = `/v1/accounts/${id}/tenants/${S.TENANT.tenantId}/contacts/search`
      const defaults = yield* S.admin("POST", path, {})
      const empty = yield* bare("POST", path)
      expect([empty.status, empty.json]).toEqual([defaults.status, defaults.json])
      expect(empty.json).not.toEqual(CONTENT_TYPE)
    }))

  it.effect("POST .../subscriptions/{subscriptionId}/disable without a body: \"{reason?}\" — the subscription is disabled", () =>
    Effect.gen(function*() {
      const { accountId, key } = yield* accountWithKey()
      const u = yield* urls
      const created = yield* request("POST", `${u.public}/subscribe`, { headers: jsonWith(key), body: JSON.stringify({ targetUrl: "https://hooks.example.com/a" }) })
      const subscriptionId = (created.json as { id: string }).id
      const disabled = yield* bare("POST", `/v1/accounts/${accountId}/subscriptions/${subscriptionId}/disable`)
      expect([disabled.status, disabled.json]).toMatchObject([200, { id: subscriptionId }])
      expect((yield* S.admin("GET", `/v1/accounts/${accountId}/subscriptions/${subscriptionId}`)).json).toMatchObject({ state: "disabled" })
    }))

  it.effect("POST .../destinations/{destinationId}/disable without a body: \"{reason?}\" — the destination is disabled", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      const created = yield* S.admin("POST", `/v1/accounts/${accountId}/destinations`, {
        kind: "webhook",
        name: "Ours",
        config: { url: "https://hooks.example.com/d" }
      })
      const destinationId = (created.json as { id: string }).id
      const disabled = yield* bare("POST", `/v1/accounts/${accountId}/destinations/${destinationId}/disable`)
      expect(disabled.status).toBe(200)
      expect((yield* S.admin("GET", `/v1/accounts/${accountId}/destinations/${destinationId}`)).json).toMatchObject({ state: "disabled" })
    }))

  it.effect("a body that is present but not JSON still gets the clear 400; a route with a required field names it when nothing is sent", () =>
    Effect.gen(function*() {
      const id = yield* S.account("live")
      const base = yield* S.adminUrl
      const path = `${base}/v1/accounts/${id}/routing`
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` }
      for (const headers of [{ ...auth, "content-type": "text/plain" }, auth]) {
        const answer = yield* request("PUT", path, { headers, body: "crm_push=false" })
        expect([answer.status, answer.json]).toEqual([400, CONTENT_TYPE])
      }
      const notJson = yield* request("PUT", path, { headers: { ...auth, "content-type": "application/json" }, body: "{\"crm_push\": " })
      expect([notJson.status, notJson.json]).toEqual([400, { error: "The request body is not valid JSON." }])
      const required = yield* bare("POST", "/v1/accounts")
      expect([required.status, required.json]).toEqual([400, { error: "name is required." }])
    }))
})
