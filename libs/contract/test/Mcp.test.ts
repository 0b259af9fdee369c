import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { JsonRpcMessage, MCP_ACCEPT, MCP_HEADERS, ToolResult, ToolsCallRequest } from "../src/Mcp.js"
import { MCP_PROTOCOL_VERSION } from "../src/Values.js"

const decodeMessage = Schema.decodeUnknownSync(JsonRpcMessage)
const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "crm-relay", version: "0.1.0" },
  "io.modelcontextprotocol/clientCapabilities": {}
}
const request = {
  jsonrpc: "2.0",
  id: "r".repeat(24),
  method: "tools/call",
  params: { name: "svc_capabilities", arguments: { tenant_id: "t", contract_version: "svc.crm.v1" }, _meta: meta }
}

describe("MCP transport envelopes (protocol 2026-07-28)", () => {
  it("Versioning rule 4: the MCP transport protocol version is 2026-07-28", () => {
    expect(MCP_PROTOCOL_VERSION).toBe("2026-07-28")
    expect(MCP_HEADERS).toEqual({
      protocolVersion: "MCP-Protocol-Version",
      method: "Mcp-Method",
      name: "Mcp-Name",
      idempotencyKey: "Idempotency-Key"
    })
    expect(MCP_ACCEPT).toBe("application/json, text/event-stream")
  })

  it("the tools/call request carries jsonrpc 2.0, a 24-character id, the tool name and the three _meta keys", () => {
    expect(Schema.decodeUnknownSync(ToolsCallRequest)(request)).toEqual(request)
    expect(() => Schema.decodeUnknownSync(ToolsCallRequest)({ ...request, id: "short" })).toThrow(/24 characters/)
    expect(() => Schema.decodeUnknownSync(ToolsCallRequest)({ ...request, params: { ...request.params, name: "svc_delete" } }))
      .toThrow(/name/)
    const { ["io.modelcontextprotocol/clientCapabilities"]: _, ...partialMeta } = meta
    expect(() =>
      Schema.decodeUnknownSync(ToolsCallRequest)({ ...request, params: { ...request.params, _meta: partialMeta } })
    ).toThrow(/clientCapabilities/)
    expect(() =>
      Schema.decodeUnknownSync(ToolsCallRequest)({
        ...request,
        params: { ...request.params, _meta: { ...meta, "io.modelcontextprotocol/protocolVersion": "2025-06-18" } }
      })
    ).toThrow(/protocolVersion/)
  })

  it("isError absent means false", () => {
    expect(Schema.decodeUnknownSync(ToolResult)({ resultType: "complete", structuredContent: { id: "x" } })).toEqual({
      resultType: "complete",
      isError: false,
      structuredContent: { id: "x" }
    })
  })

  it("a message with an id and a method is a server request, never a notification", () => {
    const message = decodeMessage({ jsonrpc: "2.0", id: 7, method: "elicitation/create", params: {} })
    expect("method" in message && "id" in message).toBe(true)
  })

  it("notifications without request ids are recognised (they may precede the final response)", () => {
    const message = decodeMessage({ jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } })
    expect(message).toEqual({ jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } })
    expect("id" in message).toBe(false)
  })

  it("JSON-RPC errors and results are told apart", () => {
    const error = decodeMessage({ jsonrpc: "2.0", id: "r".repeat(24), error: { code: -32602, message: "bad" } })
    expect("error" in error).toBe(true)
    const result = decodeMessage({
      jsonrpc: "2.0",
      id: "r".repeat(24),
      result: { resultType: "complete", isError: false, structuredContent: { id: "lead-1" } }
    })
    expect("result" in result && result.result.resultType).toBe("complete")
  })

  it("a result without resultType is not a result of this protocol", () => {
    expect(() => decodeMessage({ jsonrpc: "2.0", id: "r".repeat(24), result: { structuredContent: {} } })).toThrow()
  })
})
