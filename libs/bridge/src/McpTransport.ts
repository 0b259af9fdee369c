/**
 * The MCP transport (contract "MCP transport"): one stateless tools/call per
 * operation, POSTed to the full `{mcp_url}` over Streamable HTTP, protocol
 * 2026-07-28, with the exact headers and body the contract lists. No
 * initialize, session, discovery or server requests.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, Layer, Redacted } from "effect"
import { Mcp, Operations, Values } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"
import { Permanent } from "./BridgeError.js"
import { BridgeTransport } from "./BridgeTransport.js"
import { Egress } from "./Egress.js"
import type { InvalidConnection } from "./InvalidConnection.js"
import type { TransportEntry } from "./TransportRegistry.js"
import type { Answer } from "./internal/answers.js"
import { bodyText, checkIdentityEncoding, header, statusFailure } from "./internal/answers.js"
import { fromEventStream, fromJsonBody } from "./internal/mcpAnswer.js"
import { bearerHeader } from "./internal/bearerHeader.js"
import { send } from "./internal/send.js"
import { checkEndpointUrl } from "./internal/urls.js"

/** The registry kind of this transport. */
export const kind = "mcp"

/** The clientInfo this client announces in `_meta`. */
export const CLIENT_INFO = { name: "crm-relay", version: "0.1.0" } as const

/** The `_meta` of every tools/call: protocol version, client info, no capabilities. */
export const META: Mcp.McpRequestMeta = {
  "io.modelcontextprotocol/protocolVersion": Values.MCP_PROTOCOL_VERSION,
  "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
  "io.modelcontextprotocol/clientCapabilities": {}
}

/** A fresh 24-character JSON-RPC request id (18 random bytes, base64url). */
export const makeRequestId = (): string => randomBytes(18).toString("base64url")

const encoder = new TextEncoder()

const mediaType = (answer: Answer): string =>
  (header(answer, "content-type") ?? "").split(";")[0]!.trim().toLowerCase()

/** The structuredContent of a 2xx answer, or the failure it stands for. */
const readAnswer = (
  operation: Operations.OperationName,
  requestId: string,
  answer: Answer
): Effect.Effect<unknown, BridgeError> =>
  Effect.flatMap(statusFailure(operation, answer, "the bridge"), (failure) => {
    if (failure._tag === "Some") return Effect.fail(failure.value)
    const text = Either.flatMap(
      checkIdentityEncoding(operation, answer, "the bridge"),
      () => bodyText(operation, answer, "the bridge")
    )
    if (Either.isLeft(text)) return Effect.fail(text.left)
    const type = mediaType(answer)
    // An empty answer is judged as an empty body (never success), whatever its content type.
    if (type === "application/json" || text.right.trim() === "") return fromJsonBody(operation, answer.status, requestId, text.right)
    if (type === "text/event-stream") return fromEventStream(operation, answer.status, requestId, text.right)
    return Effect.fail(
      new Permanent({
        operation,
        status: answer.status,
        kind: "encoding",
        message: "The bridge answered with a content type other than JSON or an event stream."
      })
    )
  })

/** The MCP transport toward `mcpUrl` (entered in full; nothing is appended). */
export const layer = (mcpUrl: string): Layer.Layer<BridgeTransport, InvalidConnection, Egress> =>
  Layer.effect(
    BridgeTransport,
    Effect.gen(function*() {
      const url = (yield* checkEndpointUrl("url", "MCP URL", mcpUrl)).href
      const egress = yield* Egress
      const authorization = bearerHeader()
      return BridgeTransport.of({
        kind,
        send: (request) => {
          const tool = Operations.TOOL_NAMES[request.operation]
          const id = makeRequestId()
          const headers: Record<string, string | Redacted.Redacted<string>> = {
            "content-type": "application/json",
            "accept": Mcp.MCP_ACCEPT,
            "authorization": authorization(request.bearer),
            "mcp-protocol-version": Values.MCP_PROTOCOL_VERSION,
            "mcp-method": "tools/call",
            "mcp-name": tool
          }
          if (request.idempotencyKey !== undefined) headers["idempotency-key"] = request.idempotencyKey
          const body: Mcp.ToolsCallRequest = {
            jsonrpc: "2.0",
            id: Values.JsonRpcId.make(id),
            method: "tools/call",
            params: { name: tool, arguments: request.body, _meta: META }
          }
          return send(egress, request.operation, { url, headers, body: encoder.encode(JSON.stringify(body)), purpose: "bridge" }, "the bridge").pipe(
            Effect.flatMap((answer) =>
              Effect.map(readAnswer(request.operation, id, answer), (receipt) => ({ status: answer.status, receipt }))
            ),
          )
        }
      })
    })
  )

/** The registry entry of the MCP transport. */
export const entry: TransportEntry = { kind, layer }
