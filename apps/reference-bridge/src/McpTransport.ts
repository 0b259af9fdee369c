/**
 * The MCP transport: the six fixed tools over Streamable HTTP, protocol
 * 2026-07-28, stateless (no initialize, no session), served by the official
 * `@modelcontextprotocol/server` SDK (`createMcpHandler`, one server
 * instance per request).
 *
 * In front of the SDK a gate enforces what the contract adds to MCP: the
 * Bearer credential and its tenant, the exact `tools/call` envelope (24-char
 * id, `_meta` keys), the headers matching the body, the arguments as the
 * REST request bodies, and the Idempotency-Key on writes. Behind it, a
 * failed operation keeps the HTTP status the REST transport would answer
 * (409 for a taken slot, 400, 404), so a client classifies both transports
 * by the contract's one error table; and faults reshape the answer.
 */
import { Mcp, Operations, Validation, Values } from "@crm-relay/contract"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { CallToolResult } from "@modelcontextprotocol/server"
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server"
import { Cause, Effect, Exit, Option, Runtime, Schema } from "effect"
import type { ParseResult, Scope } from "effect"
import type { OperationRefused } from "./BridgeOperations.js"
import { BridgeOperations } from "./BridgeOperations.js"
import { Credentials } from "./Credentials.js"
import type { Fault } from "./Faults.js"
import { bearerCredential } from "./internal/bearer.js"
import { corruptReceipt } from "./internal/corruptReceipt.js"
import { toolSchema } from "./internal/mcpToolSchema.js"
import { currentFault, notePrincipal } from "./internal/requestContext.js"

/** A validated tools/call, ready to run. */
interface PreparedCall {
  readonly tenantId: string
  readonly idempotencyKey: string | undefined
  readonly execute: Effect.Effect<Readonly<Record<string, unknown>>, OperationRefused>
}

/** What the tool callback reports back to the HTTP layer. */
interface CallOutcome {
  readonly prepared: PreparedCall
  refused: OperationRefused | undefined
  defect: Cause.Cause<never> | undefined
}

const TOOL_DESCRIPTIONS: Record<Operations.OperationName, string> = {
  "capabilities": "svc.crm.v1 capabilities: the contract version and the operations this bridge supports.",
  "contacts.search": "svc.crm.v1 contacts.search: a contact by phone or email, or null when nothing matches.",
  "contacts.upsert": "svc.crm.v1 contacts.upsert: matches by phone or email identity before creating a contact.",
  "availability.list": "svc.crm.v1 availability.list: at most 50 real openings inside the requested interval.",
  "appointments.create": "svc.crm.v1 appointments.create: books the exact requested interval atomically.",
  "leads.create": "svc.crm.v1 leads.create: creates a lead, or returns the lead of the same idempotency key."
}

/** A JSON-RPC error answer with an HTTP status. */
const rpcError = (
  id: unknown,
  status: number,
  code: number,
  message: string,
  data?: unknown
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson({
    jsonrpc: "2.0",
    id: typeof id === "string" || typeof id === "number" ? id : null,
    error: data === undefined ? { code, message } : { code, message, data }
  }, { status })

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** One SSE frame in the SDK's own framing. */
const sseFrame = (message: unknown): string => `event: message\ndata: ${JSON.stringify(message)}\n\n`

const sseResponse = (frames: ReadonlyArray<unknown>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(frames.map(sseFrame).join(""), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache, no-transform" }
  })

/** The id a wrong-id fault answers with: 24 characters, never the request's. */
const otherId = (id: unknown): string => (id === "000000000000000000000000" ? "111111111111111111111111" : "000000000000000000000000")

/**
 * Reshapes a successful JSON-RPC answer as the fault says and frames it
 * (JSON, or request-scoped SSE).
 */
const answerWithFault = (
  fault: Option.Option<Fault>,
  operation: Operations.OperationName,
  args: unknown,
  message: Record<string, unknown>
): HttpServerResponse.HttpServerResponse => {
  const result = isObject(message["result"]) ? message["result"] : undefined
  if (Option.isNone(fault) || result === undefined) return HttpServerResponse.unsafeJson(message)
  const f = fault.value
  switch (f._tag) {
    case "InvalidReceipt": {
      const corrupted = corruptReceipt(f.kind, operation, args, result["structuredContent"])
      return HttpServerResponse.unsafeJson({
        ...message,
        result: { ...result, structuredContent: corrupted, content: [{ type: "text", text: JSON.stringify(corrupted) }] }
      })
    }
    case "McpTextOnly": {
      const { structuredContent, ...rest } = result
      return HttpServerResponse.unsafeJson({
        ...message,
        result: { ...rest, content: [{ type: "text", text: JSON.stringify(structuredContent) }] }
      })
    }
    case "McpWrongId":
      return HttpServerResponse.unsafeJson({ ...message, id: otherId(message["id"]) })
    case "McpOmitsIsError": {
      const { isError: _, ...rest } = result
      return HttpServerResponse.unsafeJson({ ...message, result: rest })
    }
    case "McpSse": {
      const notifications = Array.from({ length: f.notifications ?? 0 }, (_, i) => ({
        jsonrpc: "2.0",
        method: "notifications/message",
        params: { level: "info", logger: "reference-bridge", data: `working (${i + 1})` }
      }))
      return sseResponse([...notifications, message])
    }
    case "McpServerRequest":
      return sseResponse([
        {
          jsonrpc: "2.0",
          id: "srv-elicitation-000000001",
          method: "elicitation/create",
          params: {
            message: "Please confirm the booking.",
            requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } } }
          }
        },
        message
      ])
    default:
      return HttpServerResponse.unsafeJson(message)
  }
}

/** The answer of a fault that replaces running the tool, if `fault` is one. */
const faultInsteadOfTool = (fault: Option.Option<Fault>, id: string): HttpServerResponse.HttpServerResponse | undefined => {
  if (Option.isNone(fault)) return undefined
  const f = fault.value
  switch (f._tag) {
    case "McpJsonRpcError":
      return rpcError(id, 200, f.code ?? -32603, f.message ?? "Injected JSON-RPC error.")
    case "McpResultType":
      return HttpServerResponse.unsafeJson({
        jsonrpc: "2.0",
        id,
        result: {
          resultType: f.resultType ?? "input_required",
          inputRequests: {
            confirm: {
              method: "elicitation/create",
              params: { message: "Please confirm.", requestedSchema: { type: "object", properties: {} } }
            }
          }
        }
      })
    case "McpIsError":
      return HttpServerResponse.unsafeJson({
        jsonrpc: "2.0",
        id,
        result: {
          resultType: "complete",
          isError: true,
          content: [{ type: "text", text: "Injected tool error." }],
          ...(f.status === undefined ? {} : { structuredContent: { status: f.status } })
        }
      })
    default:
      return undefined
  }
}

/** Whether an Accept header admits both JSON and SSE, as the contract's request does. */
const acceptsBoth = (accept: string | undefined): boolean => {
  const types = (accept ?? "").split(",").map((t) => t.split(";")[0]!.trim().toLowerCase())
  const admits = (type: string) => types.includes(type) || types.includes("*/*")
  return admits("application/json") && admits("text/event-stream")
}

const HOP_BY_HOP = new Set(["content-length", "connection", "transfer-encoding", "keep-alive", "host"])

/**
 * Builds the MCP endpoint as an HTTP app, on the `Credentials` and
 * `BridgeOperations` in context. The SDK handler is closed with the scope.
 */
export const make: Effect.Effect<
  Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>,
  never,
  Credentials | BridgeOperations | Scope.Scope
> = Effect.gen(function*() {
  const credentials = yield* Credentials
  const operations = yield* BridgeOperations
  const runtime = yield* Effect.runtime<never>()
  const runExit = Runtime.runPromiseExit(runtime)

  /** Decodes a tool's arguments exactly as the REST request body, and binds the operation to run. */
  const prepare = <A extends { readonly tenant_id: string }, I, B, J extends Readonly<Record<string, unknown>>>(
    request: Schema.Schema<A, I>,
    response: Schema.Schema<B, J>,
    run: (tenantId: string, a: A) => Effect.Effect<B, OperationRefused>
  ) => {
    const decode = Schema.decodeUnknown(request, { errors: "all" })
    const encode = Schema.encode(response)
    return {
      input: toolSchema(request),
      output: toolSchema(response),
      prepare: (args: unknown): Effect.Effect<PreparedCall, ParseResult.ParseError> =>
        Effect.map(decode(args), (a) => ({
          tenantId: a.tenant_id,
          idempotencyKey: "idempotency_key" in a && typeof a.idempotency_key === "string" ? a.idempotency_key : undefined,
          execute: Effect.flatMap(run(a.tenant_id, a), (b) => Effect.orDie(encode(b)))
        }))
    }
  }

  const tools = {
    "capabilities": prepare(Operations.CapabilitiesRequest, Operations.CapabilitiesResponse, operations.capabilities),
    "contacts.search": prepare(Operations.ContactsSearchRequest, Operations.ContactsSearchResponse, operations.contactsSearch),
    "contacts.upsert": prepare(Operations.ContactsUpsertRequest, Operations.ContactsUpsertResponse, operations.contactsUpsert),
    "availability.list": prepare(
      Operations.AvailabilityListRequest,
      Operations.AvailabilityListResponse,
      operations.availabilityList
    ),
    "appointments.create": prepare(
      Operations.AppointmentsCreateRequest,
      Operations.AppointmentsCreateResponse,
      operations.appointmentsCreate
    ),
    "leads.create": prepare(Operations.LeadsCreateRequest, Operations.LeadsCreateResponse, operations.leadsCreate)
  } as const

  // The call being served, keyed by the web Request handed to the SDK (the SDK passes it to the factory).
  const calls = new WeakMap<Request, CallOutcome>()

  const toolResult = async (outcome: CallOutcome | undefined): Promise<CallToolResult> => {
    if (outcome === undefined) {
      return { isError: true, content: [{ type: "text", text: "This tool is only served through the svc.crm.v1 gate." }] }
    }
    const exit = await runExit(outcome.prepared.execute)
    if (Exit.isSuccess(exit)) {
      return { content: [{ type: "text", text: JSON.stringify(exit.value) }], structuredContent: { ...exit.value }, isError: false }
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) outcome.refused = failure.value
    else outcome.defect = Cause.stripFailures(exit.cause)
    return { isError: true, content: [{ type: "text", text: "The operation failed." }] }
  }

  // One SDK server instance per request: the stateless 2026-07-28 serving model.
  const handler = createMcpHandler((context) => {
    const server = new McpServer({ name: "crm-relay-reference-bridge", version: "1.0.0" }, { capabilities: { tools: {} } })
    const outcome = context.requestInfo === undefined ? undefined : calls.get(context.requestInfo)
    for (const op of Operations.OPERATIONS) {
      server.registerTool(Operations.TOOL_NAMES[op], {
        description: TOOL_DESCRIPTIONS[op],
        inputSchema: tools[op].input,
        outputSchema: tools[op].output
      }, () => toolResult(outcome))
    }
    return server
  }, { legacy: "reject", responseMode: "auto" })
  yield* Effect.addFinalizer(() => Effect.promise(() => handler.close()))

  const toWebRequest = (request: HttpServerRequest.HttpServerRequest, body: string): Request => {
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) {
      if (!HOP_BY_HOP.has(name)) headers.set(name, value)
    }
    return new Request(`https://bridge.invalid${request.url}`, { method: "POST", headers, body })
  }

  const decodeCall = Schema.decodeUnknown(Mcp.ToolsCallRequest, { errors: "all" })

  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const headers = request.headers
    if (request.method !== "POST") {
      // Stateless: no standalone SSE stream (GET) and no session to delete (DELETE).
      return HttpServerResponse.empty({ status: 405, headers: { allow: "POST" } })
    }
    // Authentication rules 1–2: every request carries a Bearer credential.
    const principal = yield* Option.match(bearerCredential(headers["authorization"]), {
      onNone: () => Effect.succeedNone,
      onSome: credentials.authenticate
    })
    if (Option.isNone(principal)) return rpcError(null, 401, -32001, "Unauthorized.")
    yield* notePrincipal(principal.value)

    if (!/^application\/json\b/i.test(headers["content-type"] ?? "")) {
      return rpcError(null, 415, -32600, "Content-Type must be application/json.")
    }
    if (!acceptsBoth(headers["accept"])) {
      return rpcError(null, 406, -32600, "Accept must admit application/json and text/event-stream.")
    }
    const text = yield* Effect.orElseSucceed(request.text, () => "")
    const parsed = yield* Effect.try(() => JSON.parse(text) as unknown).pipe(Effect.option)
    if (Option.isNone(parsed)) return rpcError(null, 400, -32700, "Parse error: the body is not JSON.")
    const body = parsed.value
    const id = isObject(body) ? body["id"] : undefined

    if (!isObject(body) || body["method"] !== "tools/call") {
      // Anything but tools/call (tools/list, server/discover, …) is the SDK's to answer or refuse.
      const response = yield* Effect.promise(() => handler.fetch(toWebRequest(request, text)))
      return HttpServerResponse.fromWeb(response)
    }

    const call = yield* Effect.either(decodeCall(body))
    if (call._tag === "Left") {
      return rpcError(id, 400, -32600, `Invalid request: ${Validation.describeParseError(call.left)}`)
    }
    const { params } = call.right
    // The protocol version, method and tool name headers must match the JSON body.
    const mismatch = headers["mcp-protocol-version"] !== params._meta["io.modelcontextprotocol/protocolVersion"]
      ? `MCP-Protocol-Version must be ${Values.MCP_PROTOCOL_VERSION}`
      : headers["mcp-method"] !== call.right.method
      ? "Mcp-Method must be tools/call"
      : headers["mcp-name"] !== params.name
      ? `Mcp-Name must be ${params.name}`
      : undefined
    if (mismatch !== undefined) return rpcError(id, 400, -32020, `Headers and body disagree: ${mismatch}.`)

    const operation = Operations.OPERATION_BY_TOOL[params.name]
    const prepared = yield* Effect.either(tools[operation].prepare(params.arguments))
    if (prepared._tag === "Left") {
      return rpcError(id, 400, -32602, `Invalid params: ${Validation.describeParseError(prepared.left)}`)
    }
    // Authentication rule 4: the credential must belong to the tenant in the arguments.
    if (prepared.right.tenantId !== principal.value.tenantId) {
      return rpcError(id, 401, -32001, "The credential does not belong to this tenant_id.")
    }
    if (Operations.isWriteOperation(operation) && headers["idempotency-key"] !== prepared.right.idempotencyKey) {
      return rpcError(id, 400, -32602, "The Idempotency-Key header must equal arguments.idempotency_key.")
    }

    const fault = yield* currentFault
    const instead = faultInsteadOfTool(fault, call.right.id)
    if (instead !== undefined) return instead

    const outcome: CallOutcome = { prepared: prepared.right, refused: undefined, defect: undefined }
    const webRequest = toWebRequest(request, text)
    calls.set(webRequest, outcome)
    const response = yield* Effect.promise(() => handler.fetch(webRequest))
    const answer = yield* Effect.promise(() => response.text())
    if (outcome.refused !== undefined) {
      const { message, reason, status } = outcome.refused
      return rpcError(id, status, -32000, message, { status, reason })
    }
    if (outcome.defect !== undefined) return yield* Effect.failCause(outcome.defect)
    const message = yield* Effect.try(() => JSON.parse(answer) as unknown).pipe(Effect.option)
    if (response.status !== 200 || Option.isNone(message) || !isObject(message.value)) {
      return HttpServerResponse.text(answer, {
        status: response.status,
        contentType: response.headers.get("content-type") ?? "application/json"
      })
    }
    return answerWithFault(fault, operation, params.arguments, message.value)
  }).pipe(Effect.withSpan("McpTransport.request"))
})
