/**
 * Faults the reference bridge can be told to inject, so a client's handling
 * of every failure the contract names can be tested against a real server.
 *
 * A {@link FaultRule} says which requests it hits (transport, operation) and
 * how many times; each matching request consumes one use. Rules are plain
 * data (Schemas), so they can be set in process, in the start options, or
 * through the HTTP control endpoint.
 */
import { Operations } from "@crm-relay/contract"
import { Schema } from "effect"

/** The token endpoint, as a pseudo-operation faults can target. */
export const TOKEN_OPERATION = "oauth.token" as const

/** A request's transport: the two bridge transports, or the OAuth token endpoint. */
export const Transport = Schema.Literal("rest", "mcp", "oauth")
export type Transport = typeof Transport.Type

/** What a fault can target: one of the six operations, or the token endpoint. */
export const FaultOperation = Schema.Union(Operations.OperationName, Schema.Literal(TOKEN_OPERATION))
export type FaultOperation = typeof FaultOperation.Type

/**
 * Ways a 2xx answer can carry an invalid receipt. Each applies to the
 * operations listed in {@link RECEIPT_KIND_OPERATIONS}.
 */
export const ReceiptKind = Schema.Literal(
  // contacts.upsert
  "is_new_string",
  // any receipt with an id (contacts.search contact, upsert, appointments, leads)
  "empty_id",
  "blank_id",
  // appointments.create
  "confirmed_false",
  "shifted_start",
  "shifted_end",
  "missing_timestamp",
  // appointments.create and availability.list (first slot)
  "timestamp_without_offset",
  "invalid_timezone",
  // availability.list
  "too_many_slots",
  "slot_outside_interval",
  "slot_end_not_after_start",
  // any operation
  "ok_true",
  "empty_object",
  // capabilities
  "unknown_contract_version",
  "unknown_operation",
  "capabilities_without_upsert",
  "capabilities_without_write",
  "availability_without_appointments",
  "availability_without_booking_closes",
  // contacts.search
  "invented_match",
  "missing_contact",
  // the token endpoint
  "token_type_not_bearer",
  "missing_access_token"
)
export type ReceiptKind = typeof ReceiptKind.Type

const ALL: ReadonlyArray<FaultOperation> = Operations.OPERATIONS
const WITH_ID: ReadonlyArray<FaultOperation> = ["contacts.search", "contacts.upsert", "appointments.create", "leads.create"]

/** The operations each receipt kind can corrupt. */
export const RECEIPT_KIND_OPERATIONS: Record<ReceiptKind, ReadonlyArray<FaultOperation>> = {
  is_new_string: ["contacts.upsert"],
  empty_id: WITH_ID,
  blank_id: WITH_ID,
  confirmed_false: ["appointments.create"],
  shifted_start: ["appointments.create"],
  shifted_end: ["appointments.create"],
  missing_timestamp: ["appointments.create"],
  timestamp_without_offset: ["appointments.create", "availability.list"],
  invalid_timezone: ["appointments.create", "availability.list"],
  too_many_slots: ["availability.list"],
  slot_outside_interval: ["availability.list"],
  slot_end_not_after_start: ["availability.list"],
  ok_true: ALL,
  empty_object: ALL,
  unknown_contract_version: ["capabilities"],
  unknown_operation: ["capabilities"],
  capabilities_without_upsert: ["capabilities"],
  capabilities_without_write: ["capabilities"],
  availability_without_appointments: ["capabilities"],
  availability_without_booking_closes: ["capabilities"],
  invented_match: ["contacts.search"],
  missing_contact: ["contacts.search"],
  token_type_not_bearer: [TOKEN_OPERATION],
  missing_access_token: [TOKEN_OPERATION]
}

/** Answer with this status instead of running the operation (or after running it, with `afterCommit`). */
export class Status extends Schema.TaggedClass<Status>()("Status", {
  status: Schema.Int.pipe(Schema.between(200, 599)),
  /** `Retry-After` header value (seconds or an HTTP date). */
  retryAfter: Schema.optionalWith(Schema.Union(Schema.String, Schema.NonNegativeInt), { exact: true }),
  /** Run (and commit) the operation first, then answer the status. */
  afterCommit: Schema.optionalWith(Schema.Boolean, { exact: true })
}) {}

/** Wait before handling the request. */
export class Delay extends Schema.TaggedClass<Delay>()("Delay", {
  millis: Schema.NonNegativeInt
}) {}

/** Run and commit the operation, then destroy the socket without answering (Errors rule 2). */
export class LostResponse extends Schema.TaggedClass<LostResponse>()("LostResponse", {}) {}

/** Answer the real receipt padded past the 1 MiB response limit with an unknown field. */
export class Oversize extends Schema.TaggedClass<Oversize>()("Oversize", {
  /** Total body size to reach; default 1 MiB + 64 KiB. */
  bytes: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { exact: true })
}) {}

/** Answer a redirect instead of running the operation. */
export class Redirect extends Schema.TaggedClass<Redirect>()("Redirect", {
  location: Schema.String,
  status: Schema.optionalWith(Schema.Literal(301, 302, 303, 307, 308), { exact: true })
}) {}

/** Answer the real receipt gzip-encoded (`Content-Encoding: gzip`). */
export class Gzip extends Schema.TaggedClass<Gzip>()("Gzip", {}) {}

/** Answer the real receipt with its last byte cut off, so it is not JSON. */
export class MalformedJson extends Schema.TaggedClass<MalformedJson>()("MalformedJson", {}) {}

/** Run the operation, then answer 200 with an empty body. */
export class EmptyBody extends Schema.TaggedClass<EmptyBody>()("EmptyBody", {}) {}

/** Run the operation, then answer a receipt corrupted as `kind` says. */
export class InvalidReceipt extends Schema.TaggedClass<InvalidReceipt>()("InvalidReceipt", {
  kind: ReceiptKind
}) {}

/** MCP: answer over request-scoped SSE, with `notifications` notification frames before the response. */
export class McpSse extends Schema.TaggedClass<McpSse>()("McpSse", {
  notifications: Schema.optionalWith(Schema.NonNegativeInt, { exact: true })
}) {}

/** MCP: answer over SSE with a server request (elicitation) before the response. */
export class McpServerRequest extends Schema.TaggedClass<McpServerRequest>()("McpServerRequest", {}) {}

/** MCP: answer a JSON-RPC error instead of running the tool. */
export class McpJsonRpcError extends Schema.TaggedClass<McpJsonRpcError>()("McpJsonRpcError", {
  code: Schema.optionalWith(Schema.Int, { exact: true }),
  message: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/** MCP: answer an incomplete result (`resultType`, default `input_required`) instead of running the tool. */
export class McpResultType extends Schema.TaggedClass<McpResultType>()("McpResultType", {
  resultType: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * MCP: answer a tool error (`isError: true`) instead of running the tool; with `status`, its
 * structuredContent names that error status (`{"status": 409}`), otherwise it is bare (the official SDK's default).
 */
export class McpIsError extends Schema.TaggedClass<McpIsError>()("McpIsError", {
  status: Schema.optionalWith(Schema.Int.pipe(Schema.between(400, 599)), { exact: true })
}) {}

/** MCP: run the tool, then answer its receipt as plain text content only (no `structuredContent`). */
export class McpTextOnly extends Schema.TaggedClass<McpTextOnly>()("McpTextOnly", {}) {}

/** MCP: run the tool, then answer with a different JSON-RPC id than the request's. */
export class McpWrongId extends Schema.TaggedClass<McpWrongId>()("McpWrongId", {}) {}

/** MCP: run the tool, then answer without `isError`, as the official MCP SDK does (MCP's schema: absent means false). */
export class McpOmitsIsError extends Schema.TaggedClass<McpOmitsIsError>()("McpOmitsIsError", {}) {}

/** Every fault. */
export const Fault = Schema.Union(
  Status,
  Delay,
  LostResponse,
  Oversize,
  Redirect,
  Gzip,
  MalformedJson,
  EmptyBody,
  InvalidReceipt,
  McpSse,
  McpServerRequest,
  McpJsonRpcError,
  McpResultType,
  McpIsError,
  McpTextOnly,
  McpWrongId,
  McpOmitsIsError
)
export type Fault = typeof Fault.Type

const MCP_ONLY = new Set<Fault["_tag"]>([
  "McpSse",
  "McpServerRequest",
  "McpJsonRpcError",
  "McpResultType",
  "McpIsError",
  "McpTextOnly",
  "McpWrongId",
  "McpOmitsIsError"
])

/**
 * Which requests a fault hits and how often. Without `transport` a rule hits
 * the two bridge transports (REST and MCP) but never the token endpoint;
 * target that with `transport: "oauth"`, `operation: "oauth.token"`, or a
 * token-only receipt kind.
 */
export class FaultRule extends Schema.Class<FaultRule>("FaultRule")({
  fault: Fault,
  operation: Schema.optionalWith(FaultOperation, { exact: true }),
  transport: Schema.optionalWith(Transport, { exact: true }),
  /** How many matching requests it hits; default 1. `"always"` never runs out. */
  times: Schema.optionalWith(Schema.Union(Schema.Int.pipe(Schema.positive()), Schema.Literal("always")), { exact: true })
}) {}

/** Where a request went: its transport and, when known, its operation. */
export interface Route {
  readonly transport: Transport
  readonly operation: FaultOperation | undefined
}

/** Whether `rule` hits a request on `route`. */
export const matches = (rule: FaultRule, route: Route): boolean => {
  const tokenOnly = rule.operation === TOKEN_OPERATION ||
    (rule.fault._tag === "InvalidReceipt" && RECEIPT_KIND_OPERATIONS[rule.fault.kind].every((op) => op === TOKEN_OPERATION))
  const transport = rule.transport ?? (tokenOnly ? "oauth" : undefined)
  if (transport === undefined ? route.transport === "oauth" : transport !== route.transport) return false
  if (rule.operation !== undefined && rule.operation !== route.operation) return false
  if (MCP_ONLY.has(rule.fault._tag) && route.transport !== "mcp") return false
  if (rule.fault._tag === "InvalidReceipt") {
    return route.operation !== undefined && RECEIPT_KIND_OPERATIONS[rule.fault.kind].includes(route.operation)
  }
  return true
}

/** Constructors, for readable tests: `Faults.status(429, { retryAfter: 2 })`. */
export const status = (code: number, options: { readonly retryAfter?: string | number; readonly afterCommit?: boolean } = {}) =>
  new Status({ status: code, ...options })
export const delay = (millis: number) => new Delay({ millis })
export const lostResponse = () => new LostResponse()
export const oversize = (bytes?: number) => new Oversize(bytes === undefined ? {} : { bytes })
export const redirect = (location: string, code?: 301 | 302 | 303 | 307 | 308) =>
  new Redirect(code === undefined ? { location } : { location, status: code })
export const gzip = () => new Gzip()
export const malformedJson = () => new MalformedJson()
export const emptyBody = () => new EmptyBody()
export const invalidReceipt = (kind: ReceiptKind) => new InvalidReceipt({ kind })
export const mcpSse = (notifications?: number) => new McpSse(notifications === undefined ? {} : { notifications })
export const mcpServerRequest = () => new McpServerRequest()
export const mcpJsonRpcError = (code?: number, message?: string) =>
  new McpJsonRpcError({ ...(code === undefined ? {} : { code }), ...(message === undefined ? {} : { message }) })
export const mcpResultType = (resultType?: string) => new McpResultType(resultType === undefined ? {} : { resultType })
export const mcpIsError = (status?: number) => new McpIsError(status === undefined ? {} : { status })
export const mcpTextOnly = () => new McpTextOnly()
export const mcpWrongId = () => new McpWrongId()
export const mcpOmitsIsError = () => new McpOmitsIsError()

/** A rule: `Faults.rule(Faults.status(503), { operation: "leads.create", times: 2 })`. */
export const rule = (
  fault: Fault,
  target: {
    readonly operation?: FaultOperation
    readonly transport?: Transport
    readonly times?: number | "always"
  } = {}
): FaultRule => new FaultRule({ fault, ...target })
