/**
 * Connection configuration: what is refused before anything is sent, how a
 * Connection selects its transport and credentials Layers, the per-tenant
 * client cache, and a new transport added as one new Layer.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Redacted } from "effect"
import { BridgeClient } from "../src/BridgeClient.js"
import { BridgeClients, connectionLayer } from "../src/BridgeClients.js"
import { BridgeTransport } from "../src/BridgeTransport.js"
import type { Connection } from "../src/Connection.js"
import * as ApiKeyCredentials from "../src/ApiKeyCredentials.js"
import { TransportRegistry } from "../src/TransportRegistry.js"
import * as Harness from "./support/Harness.js"
import { API_KEY, FakeBridge } from "./support/FakeBridge.js"
import { defaultReceipt } from "./support/FakeBridge.js"

const build = (connection: Connection) =>
  Effect.map(Effect.scoped(Layer.build(connectionLayer(connection))), (ctx) => Context.get(ctx, BridgeClient))

layer(Harness.layer)("Connections", (it) => {
  describe("configuration-time refusals", () => {
    const badKeys = ["", "has space", "tab\tkey", "new\nline", "nul\u0000", "ünïcode", "x".repeat(4097)]
    for (const key of badKeys) {
      it(`Authentication rule 2: the API key consists of visible ASCII, no spaces or control characters — ${JSON.stringify(key.slice(0, 12))} is refused`, () => {
        const result = ApiKeyCredentials.validateKey(Redacted.make(key))
        expect(Either.isLeft(result)).toBe(true)
        const message = Either.isLeft(result) ? result.left.message : ""
        if (key.length > 2) expect(message).not.toContain(key)
      })
    }

    it.effect("Authentication rule 2: a refused API key fails the connection and sends nothing", () =>
      Effect.gen(function*() {
        const { fake } = yield* Harness.client({ transport: "rest", auth: "api_key" })
        const connection = Harness.connection(fake, { transport: "rest", auth: "api_key" })
        const error = yield* Effect.flip(build({ ...connection, auth: { type: "api_key", key: Redacted.make("bad key") } }))
        expect(error).toMatchObject({ _tag: "InvalidConnection", field: "auth.key" })
        expect(fake.requests).toHaveLength(0)
      }))

    const badUrls: ReadonlyArray<readonly [string, (origin: string) => string]> = [
      ["Transport rules: public HTTPS — an http:// URL is refused", (o) => o.replace("https:", "http:")],
      ["Transport rules: URL credentials are unsupported", (o) => o.replace("https://", "https://user:pw@")],
      ["Transport rules: query strings are unsupported", (o) => `${o}/crm?x=1`],
      ["Transport rules: an empty query string is unsupported", (o) => `${o}/crm?`],
      ["Transport rules: fragments are unsupported", (o) => `${o}/crm#frag`],
      ["Transport rules: a value that is not a URL is refused", () => "bridge.example/crm"]
    ]
    for (const transport of Harness.TRANSPORTS) {
      for (const [name, url] of badUrls) {
        it.effect(`${name} (${transport})`, () =>
          Effect.gen(function*() {
            const fake = yield* FakeBridge
            const connection = Harness.connection(fake, { transport, auth: "api_key" })
            const error = yield* Effect.flip(build({ ...connection, transport: { kind: transport, url: url(fake.origin) } }))
            expect(error).toMatchObject({ _tag: "InvalidConnection", field: "url" })
          }))
      }
    }

    it.effect("Connection: an unknown transport kind is refused, naming the known ones", () =>
      Effect.gen(function*() {
        const fake = yield* FakeBridge
        const connection = Harness.connection(fake, { transport: "rest", auth: "api_key" })
        const error = yield* Effect.flip(build({ ...connection, transport: { kind: "grpc", url: fake.restUrl } }))
        expect(error).toMatchObject({ _tag: "InvalidConnection", field: "transport" })
        expect(error.message).toContain("\"rest\", \"mcp\"")
      }))
  })

  describe("REST paths", () => {
    it.effect("Endpoints: the service appends the path to {bridge_base_url} — with or without a trailing slash", () =>
      Effect.gen(function*() {
        const fake = yield* FakeBridge
        fake.reset()
        const connection = Harness.connection(fake, { transport: "rest", auth: "api_key" })
        const client = yield* build({ ...connection, transport: { kind: "rest", url: `${fake.restUrl}/` } })
        yield* client.capabilities()
        yield* client.contactsSearch({ phone: "+1", email: "" })
        yield* client.availabilityList({
          start: "2026-03-02T08:00:00Z",
          end: "2026-03-02T09:00:00Z",
          timezone: "UTC",
          windows: [],
          slot_minutes: 0,
          job_type: ""
        })
        expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
          "POST /crm/v1/capabilities",
          "POST /crm/v1/contacts/search",
          "POST /crm/v1/availability"
        ])
        expect(fake.requests[0]!.headers["content-type"]).toBe("application/json")
        expect(fake.requests[0]!.headers["accept"]).toBe("application/json")
        expect(fake.requests[0]!.headers["authorization"]).toBe(`Bearer ${API_KEY}`)
        expect(fake.requests[0]!.json).toEqual({ tenant_id: Harness.TENANT, contract_version: "svc.crm.v1" })
      }))
  })

  describe("many tenants in one process", () => {
    it.effect("Connection: each tenant's client uses its own transport and credential, and a client is reused until its configuration changes", () =>
      Effect.gen(function*() {
        const fake = yield* FakeBridge
        fake.reset()
        const clients = yield* BridgeClients
        const restTenant: Connection = { ...Harness.connection(fake, { transport: "rest", auth: "api_key" }), tenantId: "tenant-rest" }
        const mcpTenant: Connection = { ...Harness.connection(fake, { transport: "mcp", auth: "oauth" }), tenantId: "tenant-mcp" }
        const a = yield* clients.forConnection(restTenant)
        const b = yield* clients.forConnection(mcpTenant)
        yield* a.capabilities()
        yield* b.capabilities()
        expect(fake.requests.map((r) => [r.path, r.headers["authorization"]])).toEqual([
          ["/crm/v1/capabilities", `Bearer ${API_KEY}`],
          ["/mcp", "Bearer tok-1"]
        ])
        expect(fake.requests.map((r) => r.json)).toMatchObject([
          { tenant_id: "tenant-rest" },
          { params: { arguments: { tenant_id: "tenant-mcp" } } }
        ])
        expect(yield* clients.forConnection(restTenant)).toBe(a)
        const bumped = yield* clients.forConnection({ ...restTenant, version: 2 })
        expect(bumped).not.toBe(a)
        const rotated = yield* clients.forConnection({ ...restTenant, version: 2, auth: { type: "api_key", key: Redacted.make("rotated-key") } })
        expect(rotated).not.toBe(bumped)
        yield* clients.forget(restTenant.accountId, restTenant.tenantId)
        expect(yield* clients.forConnection({ ...restTenant, version: 2, auth: { type: "api_key", key: Redacted.make("rotated-key") } })).not.toBe(rotated)
      }).pipe(Effect.provide(BridgeClients.DefaultWithoutDependencies)))

    it.effect("Swappable Layers: a new transport is one new Layer registered by kind — no edit to the client", () =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const memory = {
          kind: "memory",
          layer: (url: string) =>
            Layer.succeed(BridgeTransport, BridgeTransport.of({
              kind: "memory",
              send: (request) =>
                Effect.sync(() => {
                  seen.push(`${url} ${request.operation} ${Redacted.value(request.bearer)}`)
                  return { status: 200, receipt: defaultReceipt(request.operation, request.body) }
                })
            }))
        }
        const fake = yield* FakeBridge
        const connection: Connection = {
          ...Harness.connection(fake, { transport: "rest", auth: "api_key" }),
          transport: { kind: "memory", url: "memory://crm" }
        }
        const client = yield* build(connection).pipe(
          Effect.provide(TransportRegistry.make(memory))
        )
        expect(yield* client.leadsCreate({
          job_type: "",
          summary: "",
          notes: "",
          urgency: "",
          source: "",
          call_id: "call-1",
          contact: { full_name: "", first_name: "", last_name: "", address: "", source: "", call_id: "", phones: ["+1"], emails: [], tags: [] }
        })).toEqual({ id: "lead-1" })
        expect(seen).toEqual([`memory://crm leads.create ${API_KEY}`])
      }))
  })
})
