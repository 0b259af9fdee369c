/**
 * A bridge as a customer builds one on the official MCP TypeScript SDK
 * (`@modelcontextprotocol/server`): `createMcpHandler` serves the six
 * svc.crm.v1 tools over Streamable HTTP (stateless, protocol 2026-07-28)
 * behind the SDK's `requireBearerAuth`, and each tool answers as the SDK
 * shapes a result — `structuredContent` and text, no `isError` on success,
 * and a taken slot refused the SDK's default way: HTTP 200 and a bare
 * `{isError: true, content: [text]}`. The CRM behind it (contacts, leads,
 * idempotency, in memory) and the OAuth token endpoint are the reference
 * bridge's, so only the MCP layer is the SDK's. Its calendar is small (three
 * slots a week), as a test tenant's often is, so the check's own earlier
 * bookings drain it. Served over real TLS on loopback (`sdk-bridge.localhost`).
 */
import { Operations } from "@crm-relay/contract"
import { BridgeOperations, BridgeStore, Calendar, Credentials, MemoryStore } from "@crm-relay/reference-bridge"
import * as TokenEndpoint from "@crm-relay/reference-bridge/TokenEndpoint"
import { Certificate } from "@crm-relay/testing"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { AuthInfo, CallToolResult, StandardSchemaWithJSON } from "@modelcontextprotocol/server"
import { createMcpHandler, McpServer, OAuthError, OAuthErrorCode, requireBearerAuth } from "@modelcontextprotocol/server"
import { Context, Effect, Either, Exit, JSONSchema, Layer, Option, Redacted, Runtime, Schema } from "effect"
import * as https from "node:https"
import { DnsResolver } from "../../src/DnsResolver.js"
import { Egress } from "../../src/Egress.js"
import { TokenCache } from "../../src/TokenCache.js"
import { TransportRegistry } from "../../src/TransportRegistry.js"
import { onLiveClock } from "./Harness.js"

export const SDK_HOST = "sdk-bridge.localhost"

/** Tenant t-1 with an API key and an OAuth client; t-2 with an API key, for tenant binding. */
export const TENANTS = {
  main: { tenantId: "t-1", apiKey: "sdk-key-1", clientId: "sdk client", clientSecret: "sdk secret&1" },
  other: { tenantId: "t-2", apiKey: "sdk-key-2" }
} as const

/** The running bridge. */
export interface SdkBridgeHandle {
  readonly mcpUrl: string
  readonly tokenUrl: string
  readonly ca: string
}

export class SdkBridge extends Context.Tag("test/SdkBridge")<SdkBridge, SdkBridgeHandle>() {}

/** What a tool call refused with, for the HTTP answer (the contract's error table goes by HTTP status). */
interface Refusal {
  readonly status: number
  readonly message: string
}

/**
 * An Effect Schema as the Standard Schema (with JSON Schema) the SDK takes for a tool's input. The SDK
 * validates with the Standard Schema (an Effect decode, which ignores unknown fields: Serialization rule 3);
 * the JSON Schema is only listed by tools/list, which crm-relay never calls.
 */
const inputSchema = <A, I>(schema: Schema.Schema<A, I>): StandardSchemaWithJSON<I, A> => {
  const json: Record<string, unknown> = { ...JSONSchema.make(schema) }
  return { "~standard": { ...Schema.standardSchemaV1(schema)["~standard"], jsonSchema: { input: () => json, output: () => json } } }
}

/** The MCP endpoint: the SDK's handler behind its Bearer gate; the domain runs on the reference bridge's operations. */
const mcpEndpoint = Effect.gen(function*() {
  const operations = yield* BridgeOperations.BridgeOperations
  const credentials = yield* Credentials.Credentials
  const runPromiseExit = Runtime.runPromiseExit(yield* Effect.runtime<never>())

  const gate = requireBearerAuth({
    verifier: {
      verifyAccessToken: async (token) => {
        const exit = await runPromiseExit(credentials.authenticate(Redacted.make(token)))
        const principal = Exit.isSuccess(exit) ? exit.value : Option.none()
        return Option.isNone(principal)
          ? Promise.reject(new OAuthError(OAuthErrorCode.InvalidToken, "Unknown credential."))
          : {
            token,
            clientId: principal.value.kind === "oauth" ? principal.value.clientId : "api-key",
            scopes: [],
            // The SDK's gate refuses a token without an expiry; the reference credentials enforce the real one.
            expiresAt: Math.floor(Date.now() / 1000) + 300,
            extra: { tenantId: principal.value.tenantId }
          }
      }
    }
  })

  type Outcome = { refusal: Refusal | undefined }
  // Refusals of the call being served, keyed by the web Request the SDK hands to the factory.
  const refusals = new WeakMap<Request, Outcome>()

  /** Registers one svc.crm.v1 operation as a tool of `server`, run for the caller `auth`. */
  const tool = <A extends { readonly tenant_id: string }, I, B, J extends Readonly<Record<string, unknown>>>(
    op: Operations.OperationName,
    request: Schema.Schema<A, I>,
    response: Schema.Schema<B, J>,
    run: (tenantId: string, a: A) => Effect.Effect<B, BridgeOperations.OperationRefused>
  ) => {
    const input = inputSchema(request)
    const encode = Schema.encode(response)
    return (server: McpServer, auth: AuthInfo | undefined, outcome: Outcome) =>
      server.registerTool(Operations.TOOL_NAMES[op], { description: `svc.crm.v1 ${op}`, inputSchema: input }, async (args): Promise<CallToolResult> => {
        // Authentication rule 4: the credential must belong to the tenant in the arguments.
        if (auth?.extra?.["tenantId"] !== args.tenant_id) {
          outcome.refusal = { status: 401, message: "The credential does not belong to this tenant_id." }
          return { isError: true, content: [{ type: "text", text: outcome.refusal.message }] }
        }
        const exit = await runPromiseExit(Effect.either(Effect.flatMap(run(args.tenant_id, args), (b) => Effect.orDie(encode(b)))))
        const result: Either.Either<J, Refusal> = Exit.isSuccess(exit)
          ? exit.value
          : Either.left({ status: 500, message: "The operation failed." })
        if (Either.isLeft(result)) {
          outcome.refusal = result.left
          return { isError: true, content: [{ type: "text", text: result.left.message }] }
        }
        // What the SDK's own examples answer: structuredContent and its text; isError stays the SDK's default (absent).
        return { structuredContent: { ...result.right }, content: [{ type: "text", text: JSON.stringify(result.right) }] }
      })
  }

  const tools = [
    tool("capabilities", Operations.CapabilitiesRequest, Operations.CapabilitiesResponse, operations.capabilities),
    tool("contacts.search", Operations.ContactsSearchRequest, Operations.ContactsSearchResponse, operations.contactsSearch),
    tool("contacts.upsert", Operations.ContactsUpsertRequest, Operations.ContactsUpsertResponse, operations.contactsUpsert),
    tool("availability.list", Operations.AvailabilityListRequest, Operations.AvailabilityListResponse, operations.availabilityList),
    tool("appointments.create", Operations.AppointmentsCreateRequest, Operations.AppointmentsCreateResponse, operations.appointmentsCreate),
    tool("leads.create", Operations.LeadsCreateRequest, Operations.LeadsCreateResponse, operations.leadsCreate)
  ]

  // One server instance per request: the SDK's stateless 2026-07-28 serving model.
  const handler = createMcpHandler(({ authInfo, requestInfo }) => {
    const server = new McpServer({ name: "sdk-bridge", version: "1.0.0" }, { capabilities: { tools: {} } })
    const outcome = (requestInfo === undefined ? undefined : refusals.get(requestInfo)) ?? { refusal: undefined }
    for (const register of tools) register(server, authInfo, outcome)
    return server
  }, { legacy: "reject" })
  yield* Effect.addFinalizer(() => Effect.promise(() => handler.close()))

  const serve = async (request: Request): Promise<Response> => {
    const auth = await gate(request)
    if (auth instanceof Response) return auth
    const outcome: Outcome = { refusal: undefined }
    refusals.set(request, outcome)
    const body: unknown = await request.clone().json().catch(() => undefined)
    const answer = await handler.fetch(request, { authInfo: auth })
    // A taken slot stays the SDK's default answer: HTTP 200, a bare isError text result.
    if (outcome.refusal === undefined || outcome.refusal.status === 409) return answer
    // Other refusals keep the HTTP status the REST transport would answer (401 for another tenant, 400).
    await answer.body?.cancel()
    const id = typeof body === "object" && body !== null && "id" in body ? body.id : null
    return Response.json(
      { jsonrpc: "2.0", id, error: { code: -32000, message: outcome.refusal.message } },
      { status: outcome.refusal.status }
    )
  }

  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.flatMap(HttpServerRequest.toWeb(request), (web) =>
      Effect.map(Effect.promise(() => serve(web)), HttpServerResponse.fromWeb)))
})

/** Starts the bridge; it stops with the scope. */
const make = Effect.gen(function*() {
  const tls = yield* Certificate.generateTlsMaterial({ dnsNames: [SDK_HOST], ips: ["127.0.0.1"] })
  const credentials = yield* Credentials.make([
    {
      tenantId: TENANTS.main.tenantId,
      apiKey: TENANTS.main.apiKey,
      oauth: { clientId: TENANTS.main.clientId, clientSecret: TENANTS.main.clientSecret, expiresIn: 3600 }
    },
    { tenantId: TENANTS.other.tenantId, apiKey: TENANTS.other.apiKey }
  ])
  // Mondays 09:00–12:00: three one-hour slots a week.
  const calendar = yield* Either.match(Calendar.make({ openingHours: [[0, 9 * 60, 12 * 60]] }), {
    onLeft: Effect.die,
    onRight: Effect.succeed
  })
  const operations = yield* BridgeOperations.make({ operations: Operations.OPERATIONS, bookingClosesAvailability: true, calendar }).pipe(
    Effect.provideService(BridgeStore.BridgeStore, yield* MemoryStore.make)
  )
  const context = Context.make(Credentials.Credentials, credentials).pipe(Context.add(BridgeOperations.BridgeOperations, operations))
  const mcp = yield* Effect.provide(mcpEndpoint, context)
  const token = yield* Effect.provide(TokenEndpoint.make, context)

  const server = yield* NodeHttpServer.make(() => https.createServer({ cert: tls.cert, key: tls.key }), { host: "127.0.0.1", port: 0 })
  yield* server.serve(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    request.url === "/mcp" ? mcp : request.url === "/oauth/token" ? token : Effect.succeed(HttpServerResponse.empty({ status: 404 }))
  )).pipe(Effect.provide(NodeHttpServer.layerContext))
  const origin = `https://${SDK_HOST}:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
  return { mcpUrl: `${origin}/mcp`, tokenUrl: `${origin}/oauth/token`, ca: tls.ca } satisfies SdkBridgeHandle
})

/** The SDK bridge and egress that trusts and reaches it, with a token cache and the transports. */
export const layer = Layer.unwrapEffect(
  Effect.map(SdkBridge, (bridge) =>
    Layer.mergeAll(
      Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: bridge.ca }).pipe(
        Layer.provide(DnsResolver.layerStatic({ [SDK_HOST]: ["127.0.0.1"] }))
      ).pipe(onLiveClock),
      TokenCache.Default,
      TransportRegistry.Default
    ))
).pipe(Layer.provideMerge(Layer.scoped(SdkBridge, make)), Layer.orDie)
