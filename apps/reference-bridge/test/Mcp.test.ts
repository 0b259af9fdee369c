/**
 * The MCP transport rules: Streamable HTTP at protocol 2026-07-28, headers
 * matching the body, the fixed envelope, structured results equal to the
 * REST objects, and the MCP-only faults.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Faults from "../src/Faults.js"
import { call, MCP_META } from "./support/bridgeClient.js"
import { appointment, bodies, KEY_A, lead } from "./support/fixtures.js"
import * as H from "./support/https.js"
import { startBridge } from "./support/startBridge.js"

const mcp = (bridge: Parameters<typeof call>[1], agent: Parameters<typeof call>[2]) =>
(operation: Parameters<typeof call>[3], body: Record<string, unknown>, options: Parameters<typeof call>[5] = {}) =>
  call("mcp", bridge, agent, operation, body, options)

describe("MCP transport", () => {
  it.scopedLive("MCP transport: arguments and structured results equal the REST request and response objects", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      for (const [operation, body] of [
        ["capabilities", bodies.capabilities()],
        ["contacts.search", bodies.search("+1 555 000 1111", "")]
      ] as const) {
        const rest = yield* call("rest", bridge, agent, operation, body)
        const viaMcp = yield* call("mcp", bridge, agent, operation, body)
        expect(viaMcp.receipt).toEqual(rest.receipt)
        const [message] = viaMcp.messages
        expect(message).toMatchObject({ jsonrpc: "2.0", id: viaMcp.rpcId, result: { resultType: "complete", isError: false } })
      }
    }))

  it.scopedLive("MCP transport: the protocol version, method and tool name headers must match the JSON body", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const send = mcp(bridge, agent)
      const cases: ReadonlyArray<Record<string, string | null>> = [
        { "mcp-protocol-version": null },
        { "mcp-protocol-version": "2025-06-18" },
        { "mcp-method": null },
        { "mcp-method": "tools/list" },
        { "mcp-name": null },
        { "mcp-name": "svc_capabilities" }
      ]
      for (const headers of cases) {
        const answer = yield* send("leads.create", bodies.lead(), { headers })
        expect([answer.status, (answer.answer.json as { error?: { code: number } }).error?.code]).toEqual([400, -32020])
      }
      expect((yield* bridge.control.records).leads).toHaveLength(0)
    }))

  it.scopedLive("MCP transport: the envelope is fixed: 24-character string id, tools/call, the three _meta keys", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const send = mcp(bridge, agent)
      const params = (meta: unknown) => ({ name: "svc_capabilities", arguments: bodies.capabilities(), _meta: meta })
      const { "io.modelcontextprotocol/clientCapabilities": _, ...withoutCapabilities } = MCP_META
      const envelopes = [
        { id: "short-id" },
        { id: 123456789012345678901234 },
        { params: params(withoutCapabilities) },
        { params: params({ ...MCP_META, "io.modelcontextprotocol/clientInfo": { name: "x" } }) },
        { params: params({ ...MCP_META, "io.modelcontextprotocol/protocolVersion": "2025-06-18" }) }
      ]
      for (const envelope of envelopes) {
        const answer = yield* send("capabilities", bodies.capabilities(), { envelope })
        expect(answer.status).toBe(400)
        expect(answer.answer.json).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } })
      }
    }))

  it.scopedLive("MCP transport: invalid arguments are refused before the tool runs", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const body = { ...bodies.lead(lead({ contact: "not an object" })) }
      const answer = yield* mcp(bridge, agent)("leads.create", body)
      expect(answer.status).toBe(400)
      expect(answer.answer.json).toMatchObject({ error: { code: -32602 } })
      expect((yield* bridge.control.records).leads).toHaveLength(0)
    }))

  it.scopedLive("MCP transport: a taken slot keeps HTTP 409, with a JSON-RPC error and no result", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const send = mcp(bridge, agent)
      const { id } = (yield* send("contacts.upsert", bodies.upsert())).receipt as { id: string }
      yield* send("appointments.create", bodies.appointment(appointment(id)))
      const taken = yield* send("appointments.create", bodies.appointment(appointment(id)))
      expect(taken.status).toBe(409)
      expect(taken.messages).toEqual([
        { jsonrpc: "2.0", id: taken.rpcId, error: { code: -32000, message: expect.any(String), data: { status: 409, reason: "slot_taken" } } }
      ])
    }))

  it.scopedLive("MCP transport: Accept must admit JSON and SSE, the body must be JSON; GET has no stream", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const send = mcp(bridge, agent)
      expect((yield* send("capabilities", bodies.capabilities(), { headers: { accept: "application/json" } })).status).toBe(406)
      expect((yield* send("capabilities", bodies.capabilities(), { headers: { "content-type": "text/plain" } })).status).toBe(415)
      const get = yield* H.send(agent, "GET", bridge.mcpUrl, { headers: { authorization: `Bearer ${KEY_A}` } })
      expect(get.status).toBe(405)
    }))

  it.scopedLive("MCP transport: no initialize or session exchange; a 2025-era initialize is refused", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const answer = yield* H.postJson(agent, bridge.mcpUrl, {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } }
      }, { authorization: `Bearer ${KEY_A}`, accept: "application/json, text/event-stream" })
      expect(answer.status).toBe(400)
      expect(answer.json).toMatchObject({ jsonrpc: "2.0", error: { code: expect.any(Number) } })
      expect(answer.headers["mcp-session-id"]).toBeUndefined()
    }))
})

describe("MCP faults", () => {
  const withFault = (fault: Faults.Fault) =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(fault, { transport: "mcp" })
      const answer = yield* mcp(bridge, agent)("leads.create", bodies.lead())
      const stored = (yield* bridge.control.records).leads.length
      return { answer, stored }
    })

  it.scopedLive("Response framing: request-scoped SSE with notifications (no id) before the final response", () =>
    Effect.gen(function*() {
      const { answer, stored } = yield* withFault(Faults.mcpSse(2))
      expect(answer.answer.headers["content-type"]).toMatch(/^text\/event-stream/)
      expect(answer.messages.map((m) => "id" in m)).toEqual([false, false, true])
      expect(answer.messages[0]).toMatchObject({ method: "notifications/message" })
      expect(answer.messages[2]).toMatchObject({ id: answer.rpcId, result: { resultType: "complete", isError: false } })
      expect(answer.receipt).toEqual({ id: expect.any(String) })
      expect(stored).toBe(1)
    }))

  it.scopedLive("a server request before the response is sent as its own SSE frame", () =>
    Effect.gen(function*() {
      const { answer } = yield* withFault(Faults.mcpServerRequest())
      expect(answer.messages).toHaveLength(2)
      expect(answer.messages[0]).toMatchObject({ id: expect.any(String), method: "elicitation/create" })
    }))

  it.scopedLive("a JSON-RPC error, an incomplete result or isError true answer without running the tool", () =>
    Effect.gen(function*() {
      const error = yield* withFault(Faults.mcpJsonRpcError(-32603, "boom"))
      expect(error.answer.messages).toEqual([{ jsonrpc: "2.0", id: error.answer.rpcId, error: { code: -32603, message: "boom" } }])
      expect(error.stored).toBe(0)
      const incomplete = yield* withFault(Faults.mcpResultType())
      expect(incomplete.answer.messages[0]).toMatchObject({ result: { resultType: "input_required" } })
      expect(incomplete.stored).toBe(0)
      const isError = yield* withFault(Faults.mcpIsError())
      expect(isError.answer.messages[0]).toMatchObject({ result: { resultType: "complete", isError: true } })
      expect(isError.answer.receipt).toBeUndefined()
      expect(isError.stored).toBe(0)
    }))

  it.scopedLive("plain text only: the write ran, but the receipt is only text content", () =>
    Effect.gen(function*() {
      const { answer, stored } = yield* withFault(Faults.mcpTextOnly())
      expect(answer.receipt).toBeUndefined()
      const result = answer.messages[0]!["result"] as { content: Array<{ type: string; text: string }> }
      expect(JSON.parse(result.content[0]!.text)).toEqual({ id: expect.any(String) })
      expect(stored).toBe(1)
    }))

  it.scopedLive("a wrong id echo answers another 24-character id", () =>
    Effect.gen(function*() {
      const { answer } = yield* withFault(Faults.mcpWrongId())
      const id = answer.messages[0]!["id"]
      expect(typeof id === "string" && id.length === 24 && id !== answer.rpcId).toBe(true)
    }))

  it.scopedLive("isError omitted (the official MCP SDK's shape): the write ran, the receipt is structuredContent and isError is absent", () =>
    Effect.gen(function*() {
      const { answer, stored } = yield* withFault(Faults.mcpOmitsIsError())
      const result = answer.messages[0]!["result"] as Record<string, unknown>
      expect(result).toMatchObject({ resultType: "complete", structuredContent: { id: expect.any(String) } })
      expect("isError" in result).toBe(false)
      expect(stored).toBe(1)
    }))

  it.scopedLive("MCP-only faults never hit the REST transport", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(Faults.mcpIsError())
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      expect(yield* bridge.control.pendingFaults).toHaveLength(1)
    }))
})
