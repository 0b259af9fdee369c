/**
 * The fixed MCP tool transport of svc.crm.v1 (Streamable HTTP, protocol
 * 2026-07-28): the tools/call request, its response, JSON-RPC errors,
 * notifications and server requests.
 */
import { Schema } from "effect"
import { ToolNameSchema } from "./Operations.js"
import { JsonRpcId, MCP_PROTOCOL_VERSION } from "./Values.js"

/** The HTTP headers of an MCP request; version, method and tool name must match the body. */
export const MCP_HEADERS = {
  protocolVersion: "MCP-Protocol-Version",
  method: "Mcp-Method",
  name: "Mcp-Name",
  idempotencyKey: "Idempotency-Key"
} as const

/** The `Accept` header of an MCP request: a JSON body or request-scoped SSE. */
export const MCP_ACCEPT = "application/json, text/event-stream"

/** `_meta` keys every 2026-07-28 request carries instead of a session. */
export const McpRequestMeta = Schema.Struct({
  "io.modelcontextprotocol/protocolVersion": Schema.Literal(MCP_PROTOCOL_VERSION),
  "io.modelcontextprotocol/clientInfo": Schema.Struct({ name: Schema.String, version: Schema.String }),
  "io.modelcontextprotocol/clientCapabilities": Schema.Struct({})
}).annotations({ identifier: "McpRequestMeta" })
export type McpRequestMeta = typeof McpRequestMeta.Type

/** A JSON object (the arguments of a tool call: the REST request body). */
const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  // Decoding never copies a "__proto__" key onto an object (no prototype pollution), so none is generated.
  arbitrary: () => (fc) => fc.dictionary(fc.string().filter((k) => k !== "__proto__"), fc.jsonValue())
})

/** The tools/call request; `arguments` are the REST request body fields. */
export const ToolsCallRequest = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: JsonRpcId,
  method: Schema.Literal("tools/call"),
  params: Schema.Struct({
    name: ToolNameSchema,
    arguments: JsonObject,
    _meta: McpRequestMeta
  })
}).annotations({ identifier: "ToolsCallRequest" })
export type ToolsCallRequest = typeof ToolsCallRequest.Type

/** Any JSON-RPC id as it may appear in an answer. */
const AnyId = Schema.Union(Schema.String, Schema.Number, Schema.Null)

/**
 * The result of tools/call: `resultType` must be `complete` for a receipt,
 * `isError` absent means false, and `structuredContent` is the REST response
 * object. Plain-text `content` is never parsed into a receipt.
 */
export const ToolResult = Schema.Struct({
  resultType: Schema.String,
  isError: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => false }),
  structuredContent: Schema.optionalWith(Schema.Unknown, { exact: true }),
  content: Schema.optionalWith(Schema.Array(Schema.Unknown), { exact: true })
}).annotations({ identifier: "ToolResult" })
export type ToolResult = typeof ToolResult.Type

/** A successful JSON-RPC response. */
export const JsonRpcResult = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: AnyId,
  result: ToolResult
}).annotations({ identifier: "JsonRpcResult" })
export type JsonRpcResult = typeof JsonRpcResult.Type

/** A JSON-RPC error response; it always fails the operation. */
export const JsonRpcError = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: AnyId,
  error: Schema.Struct({
    code: Schema.Int,
    message: Schema.String,
    data: Schema.optionalWith(Schema.Unknown, { exact: true })
  })
}).annotations({ identifier: "JsonRpcError" })
export type JsonRpcError = typeof JsonRpcError.Type

/** A notification: a method and no id. It may precede the final response and is skipped. */
export const JsonRpcNotification = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  method: Schema.String,
  params: Schema.optionalWith(Schema.Unknown, { exact: true }),
  id: Schema.optionalWith(Schema.Never, { exact: true })
}).annotations({ identifier: "JsonRpcNotification" })
export type JsonRpcNotification = typeof JsonRpcNotification.Type

/** A request from the server (a method with an id); unsupported, it fails the operation. */
export const JsonRpcServerRequest = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Schema.Union(Schema.String, Schema.Number),
  method: Schema.String,
  params: Schema.optionalWith(Schema.Unknown, { exact: true })
}).annotations({ identifier: "JsonRpcServerRequest" })
export type JsonRpcServerRequest = typeof JsonRpcServerRequest.Type

/**
 * Any message an MCP server may send on the response stream. The union is
 * ordered so that a message with both `id` and `method` is a server request,
 * never mistaken for a notification.
 */
export const JsonRpcMessage = Schema.Union(
  JsonRpcServerRequest,
  JsonRpcNotification,
  JsonRpcError,
  JsonRpcResult
).annotations({ identifier: "JsonRpcMessage" })
export type JsonRpcMessage = typeof JsonRpcMessage.Type
