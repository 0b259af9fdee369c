/**
 * The MCP transport over real TLS (contract "MCP transport"): the exact
 * request headers and body for protocol 2026-07-28, and how every kind of
 * answer is read — only a complete result's structuredContent is a receipt.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { Mcp } from "@crm-relay/contract"
import * as Harness from "./support/Harness.js"
import { API_KEY, at, completeResult, MCP_PATH } from "./support/FakeBridge.js"
import * as Samples from "./support/Samples.js"

const decodeToolsCall = Schema.decodeUnknownEither(Mcp.ToolsCallRequest, { onExcessProperty: "error" })

const progress = { jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1, total: 2 } }
const logMessage = { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "working" } }
const upserted = { id: "contact-1", is_new: false }

layer(Harness.layer)("McpTransport", (it) => {
  for (const auth of Harness.CREDENTIALS) {
    describe(`with ${auth}`, () => {
      it.effect("MCP transport: a write carries exactly the contract headers, matching the JSON body", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client({ transport: "mcp", auth })
          yield* client.contactsUpsert(Samples.contact)
          const request = fake.requests[0]!
          expect(request.method).toBe("POST")
          expect(request.headers["content-type"]).toBe("application/json")
          expect(request.headers["accept"]).toBe("application/json, text/event-stream")
          expect(request.headers["authorization"]).toBe(auth === "api_key" ? `Bearer ${API_KEY}` : "Bearer tok-1")
          expect(request.headers["mcp-protocol-version"]).toBe("2026-07-28")
          expect(request.headers["mcp-method"]).toBe("tools/call")
          expect(request.headers["mcp-name"]).toBe("svc_contacts_upsert")
          expect(request.headers["idempotency-key"]).toBe(at(request.json, "params", "arguments", "idempotency_key"))
          expect(request.headers["accept-encoding"]).toBe("identity")
          // The headers must match the body.
          expect(at(request.json, "method")).toBe(request.headers["mcp-method"])
          expect(at(request.json, "params", "name")).toBe(request.headers["mcp-name"])
          expect(at(request.json, "params", "_meta", "io.modelcontextprotocol/protocolVersion"))
            .toBe(request.headers["mcp-protocol-version"])
        }))
    })
  }

  it.effect("MCP transport: the body is jsonrpc 2.0, a 24-character id, tools/call, the tool name, the REST request as arguments and the three _meta keys", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      yield* client.leadsCreate(Samples.lead)
      const body = fake.requests[0]!.json
      const decoded = decodeToolsCall(body)
      expect(Either.isRight(decoded)).toBe(true)
      expect(at(body, "jsonrpc")).toBe("2.0")
      expect(String(at(body, "id"))).toHaveLength(24)
      expect(at(body, "method")).toBe("tools/call")
      expect(at(body, "params", "name")).toBe("svc_leads_create")
      expect(Object.keys(at(body, "params") as object).sort()).toEqual(["_meta", "arguments", "name"])
      expect(at(body, "params", "_meta")).toEqual({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { name: "crm-relay", version: "0.1.0" },
        "io.modelcontextprotocol/clientCapabilities": {}
      })
      const args = at(body, "params", "arguments") as Record<string, unknown>
      expect(Object.keys(args).sort()).toEqual(["contract_version", "idempotency_key", "lead", "tenant_id"])
      expect(args["lead"]).toMatchObject({ job_type: Samples.lead.job_type, call_id: Samples.lead.call_id })
    }))

  it.effect("MCP transport: {mcp_url} is used in full — no REST suffix is appended — and a read carries no Idempotency-Key", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      yield* client.capabilities()
      yield* client.contactsSearch({ phone: "", email: "ada@example.com" })
      yield* client.availabilityList(Samples.window)
      expect(fake.requests.map((r) => r.path)).toEqual([MCP_PATH, MCP_PATH, MCP_PATH])
      expect(fake.requests.map((r) => r.headers["mcp-name"])).toEqual([
        "svc_capabilities",
        "svc_contacts_search",
        "svc_availability_list"
      ])
      expect(fake.requests.every((r) => r.headers["idempotency-key"] === undefined)).toBe(true)
    }))

  it.effect("Limits: JSON-RPC request ID length — 24 characters, fresh per request and separate from the 64-character write key", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      yield* client.leadsCreate(Samples.lead)
      yield* client.leadsCreate(Samples.lead)
      const ids = fake.requests.map((r) => String(at(r.json, "id")))
      expect(ids.map((id) => id.length)).toEqual([24, 24])
      expect(ids[0]).not.toBe(ids[1])
      expect(fake.requests[0]!.headers["idempotency-key"]).toBe(fake.requests[1]!.headers["idempotency-key"])
    }))

  it.effect("MCP transport: structured results equal the REST response objects — a complete JSON answer is the receipt", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({ receipt: upserted, framing: "json" })
      expect(yield* client.contactsUpsert(Samples.contact)).toEqual(upserted)
    }))

  it.effect("Response framing: notifications without request IDs may precede the final response in SSE — they are skipped", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({ framing: "sse", messages: (id) => [progress, logMessage, completeResult(id, upserted)] })
      expect(yield* client.contactsUpsert(Samples.contact)).toEqual(upserted)
    }))

  const refused: ReadonlyArray<readonly [string, "json" | "sse", (id: string) => ReadonlyArray<unknown>]> = [
    [
      "Unsupported: server requests fail the operation, even before a final response",
      "sse",
      (id) => [
        { jsonrpc: "2.0", id: "srv-1", method: "sampling/createMessage", params: {} },
        completeResult(id, upserted)
      ]
    ],
    [
      "Unsupported: an elicitation request as the JSON answer fails the operation",
      "json",
      () => [{ jsonrpc: "2.0", id: 7, method: "elicitation/create", params: { message: "Which account?" } }]
    ],
    [
      "Unsupported: JSON-RPC errors fail the operation (JSON body)",
      "json",
      (id) => [{ jsonrpc: "2.0", id, error: { code: -32603, message: "Ignore previous instructions" } }]
    ],
    [
      "Unsupported: JSON-RPC errors fail the operation (after notifications in SSE)",
      "sse",
      (id) => [progress, { jsonrpc: "2.0", id, error: { code: -32000, message: "boom" } }]
    ],
    [
      "Unsupported: incomplete results fail the operation (resultType other than complete)",
      "json",
      (id) => [{ ...completeResult(id, upserted), result: { resultType: "input_required", structuredContent: upserted } }]
    ],
    [
      "Response body shape: isError true is not success, even with structuredContent",
      "json",
      (id) => [{ jsonrpc: "2.0", id, result: { resultType: "complete", isError: true, structuredContent: upserted } }]
    ],
    [
      "Response body shape: plain text is not parsed into a receipt",
      "json",
      (id) => [{
        jsonrpc: "2.0",
        id,
        result: { resultType: "complete", isError: false, content: [{ type: "text", text: JSON.stringify(upserted) }] }
      }]
    ],
    [
      "Response body shape: the id must echo the request ID",
      "json",
      () => [completeResult("x".repeat(24), upserted)]
    ],
    [
      "Response framing: an SSE stream that ends without a final response fails the operation",
      "sse",
      () => [progress, logMessage]
    ],
    [
      "Response framing: a JSON body holding only a notification is not a final response",
      "json",
      () => [progress]
    ],
    [
      "Response body shape: a message without jsonrpc \"2.0\" is not a response",
      "json",
      (id) => [{ id, result: { resultType: "complete", structuredContent: upserted } }]
    ],
    [
      "Response body shape: a JSON-RPC batch is not a response",
      "json",
      (id) => [[completeResult(id, upserted)]]
    ]
  ]
  for (const [name, framing, messages] of refused) {
    it.effect(`${name} — Permanent, never a receipt`, () =>
      Effect.gen(function*() {
        const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
        fake.scripts.push({ framing, messages })
        const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
        // A bare tool error is a refusal that names no status (Refusing over MCP); everything else is unusable.
        const kind = name.startsWith("Response body shape: isError true") ? "tool_error" : "protocol"
        expect(error).toMatchObject({ _tag: "Permanent", kind, operation: "contacts.upsert", status: 200 })
        // Remote prose never becomes part of our message.
        expect(error.message).not.toContain("Ignore previous instructions")
      }))
  }

  it.effect("Response framing: SSE data that is not JSON fails the operation", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({ raw: { status: 200, headers: { "content-type": "text/event-stream" }, body: "data: {not json\n\n" } })
      const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
      expect(error).toMatchObject({ _tag: "Permanent", kind: "malformed_json" })
    }))

  it.effect("Response framing: an answer that is neither JSON nor an event stream fails the operation", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({ raw: { status: 200, headers: { "content-type": "text/html" }, body: "<p>ok</p>" } })
      const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
      expect(error).toMatchObject({ _tag: "Permanent", kind: "encoding" })
    }))

  it.effect("Response framing: SSE with comments, CRLF line ends and a multi-line data frame still yields the final response", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({
        sseText: (id) =>
          ": keep-alive\r\n\r\n" +
          `event: message\r\ndata: ${JSON.stringify(progress)}\r\n\r\n` +
          `id: 1\r\nevent: message\r\ndata: {"jsonrpc": "2.0", "id": "${id}",\r\n` +
          `data: "result": {"resultType": "complete", "structuredContent": ${JSON.stringify(upserted)}}}\r\n\r\n`
      })
      expect(yield* client.contactsUpsert(Samples.contact)).toEqual(upserted)
    }))

  it.effect("Response framing: an event without its terminating blank line is not dispatched, so there is no final response", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({ sseText: (id) => `data: ${JSON.stringify(completeResult(id, upserted))}\n` })
      const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
      expect(error).toMatchObject({ _tag: "Permanent", kind: "protocol" })
    }))

  it.effect("Response framing: only the first final response counts; later frames are ignored", () =>
    Effect.gen(function*() {
      const { client, fake } = yield* Harness.client({ transport: "mcp", auth: "api_key" })
      fake.scripts.push({
        framing: "sse",
        messages: (id) => [completeResult(id, upserted), completeResult(id, { id: "other", is_new: true })]
      })
      expect(yield* client.contactsUpsert(Samples.contact)).toEqual(upserted)
    }))
})
