/**
 * Calls a running reference bridge the way the contract says a client
 * does, over either transport, with plain node:https: REST POSTs to
 * `{bridge_base_url}/…`, or MCP tools/call with the 2026-07-28 envelope.
 */
import { Operations } from "@crm-relay/contract"
import { Effect } from "effect"
import type * as https from "node:https"
import type { ReferenceBridgeHandle } from "../../src/ReferenceBridge.js"
import { newRpcId } from "./fixtures.js"
import type { Answer, ExchangeFailed } from "./https.js"
import { send } from "./https.js"

export type TransportName = "rest" | "mcp"

export interface CallOptions {
  /** Bearer credential; `null` sends no Authorization header. */
  readonly credential?: string | null
  /** Extra or replacing headers (lower-case names); a value `null` removes a header. */
  readonly headers?: Record<string, string | null>
  /** Replaces the MCP JSON-RPC envelope fields. */
  readonly envelope?: Record<string, unknown>
}

export interface CallResult {
  readonly status: number
  /** REST: the JSON body. MCP: the final message's `result.structuredContent`. */
  readonly receipt: unknown
  readonly answer: Answer
  /** MCP: every JSON-RPC message of the answer (one for JSON, several for SSE). */
  readonly messages: ReadonlyArray<Record<string, unknown>>
  /** MCP: the JSON-RPC request id sent. */
  readonly rpcId: string | undefined
}

export const MCP_META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "reference-bridge-tests", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": {}
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The JSON-RPC messages of an MCP answer, JSON or SSE. */
export const mcpMessages = (answer: Answer): Array<Record<string, unknown>> => {
  const type = String(answer.headers["content-type"] ?? "")
  if (type.startsWith("text/event-stream")) {
    return answer.text
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => JSON.parse(line.slice(5).trim()) as unknown)
      .filter(isObject)
  }
  return isObject(answer.json) ? [answer.json] : []
}

const withHeaders = (base: Record<string, string>, extra: Record<string, string | null> = {}): Record<string, string> => {
  const out: Record<string, string> = { ...base }
  for (const [name, value] of Object.entries(extra)) {
    if (value === null) delete out[name]
    else out[name] = value
  }
  return out
}

/** Calls `operation` with `body` on `bridge` over `transport`. */
export const call = (
  transport: TransportName,
  bridge: Pick<ReferenceBridgeHandle, "restBaseUrl" | "mcpUrl">,
  agent: https.Agent,
  operation: Operations.OperationName,
  body: Record<string, unknown>,
  options: CallOptions = {}
): Effect.Effect<CallResult, ExchangeFailed> => {
  const auth: Record<string, string> = options.credential === null
    ? {}
    : { authorization: `Bearer ${options.credential ?? "key-a_0123456789"}` }
  const key: Record<string, string> = Operations.isWriteOperation(operation) && typeof body["idempotency_key"] === "string"
    ? { "idempotency-key": body["idempotency_key"] }
    : {}
  if (transport === "rest") {
    const headers = withHeaders({ "content-type": "application/json", accept: "application/json", ...auth, ...key }, options.headers)
    return Effect.map(
      send(agent, "POST", `${bridge.restBaseUrl}${Operations.REST_PATHS[operation]}`, { headers, body: JSON.stringify(body) }),
      (answer) => ({ status: answer.status, receipt: answer.json, answer, messages: [], rpcId: undefined })
    )
  }
  const tool = Operations.TOOL_NAMES[operation]
  const rpcId = newRpcId()
  const envelope = {
    jsonrpc: "2.0",
    id: rpcId,
    method: "tools/call",
    params: { name: tool, arguments: body, _meta: MCP_META },
    ...options.envelope
  }
  const headers = withHeaders({
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    ...auth,
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": tool,
    ...key
  }, options.headers)
  return Effect.map(send(agent, "POST", bridge.mcpUrl, { headers, body: JSON.stringify(envelope) }), (answer) => {
    const messages = mcpMessages(answer)
    const final = messages.findLast((m) => "result" in m || "error" in m)
    const result = final !== undefined && isObject(final["result"]) ? final["result"] : undefined
    return { status: answer.status, receipt: result?.["structuredContent"], answer, messages, rpcId }
  })
}
