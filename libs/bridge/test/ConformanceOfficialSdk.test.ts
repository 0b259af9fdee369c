/**
 * One reading of the MCP answer. A bridge built on the official MCP
 * TypeScript SDK omits `isError` when a tool succeeds (MCP's schema makes it
 * optional, default false) and refuses a taken slot with HTTP 200 and a bare
 * `isError: true` text result: crm-relay's client pushes through it, and the
 * conformance check reads its answers the same way — it earns the write level
 * with an API key and with OAuth, the same verdicts on every run, and what the
 * contract's wording asks more of (or does not say) is a WARN with a hint,
 * never a FAIL.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Redacted, Schema } from "effect"
import { Conformance as Contract } from "@crm-relay/contract"
import { connectionLayer } from "../src/BridgeClients.js"
import { BridgeClient } from "../src/BridgeClient.js"
import * as Conformance from "../src/Conformance.js"
import * as ConformanceReport from "../src/ConformanceReport.js"
import type { Connection } from "../src/Connection.js"
import type { BridgeError } from "../src/BridgeError.js"
import type { Reading } from "../src/internal/mcpAnswer.js"
import { fromEventStream, fromJsonBody } from "../src/internal/mcpAnswer.js"
import type { Exchange } from "../src/internal/conformance/recorder.js"
import { readAnswer } from "../src/internal/conformance/wireChecks.js"
import { TokenCache } from "../src/TokenCache.js"
import * as Samples from "./support/Samples.js"
import * as SdkBridge from "./support/SdkBridge.js"

const RULE = "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object."

const connection = (bridge: SdkBridge.SdkBridgeHandle, auth: "api_key" | "oauth"): Connection => ({
  accountId: "account-1",
  tenantId: SdkBridge.TENANTS.main.tenantId,
  version: 1,
  transport: { kind: "mcp", url: bridge.mcpUrl },
  auth: auth === "api_key"
    ? { type: "api_key", key: Redacted.make(SdkBridge.TENANTS.main.apiKey) }
    : {
      type: "oauth",
      tokenUrl: bridge.tokenUrl,
      clientId: SdkBridge.TENANTS.main.clientId,
      clientSecret: Redacted.make(SdkBridge.TENANTS.main.clientSecret)
    }
})

const otherTenant = {
  tenantId: SdkBridge.TENANTS.other.tenantId,
  auth: { type: "api_key" as const, key: Redacted.make(SdkBridge.TENANTS.other.apiKey) }
}

describe(`MCP transport: "${RULE}" — isError absent means false (MCP's schema), in the client and in the check alike`, () => {
  const id = "r".repeat(24)
  const receipt = { id: "lead-1" }
  const results: ReadonlyArray<readonly [string, unknown, boolean]> = [
    ["isError absent", { resultType: "complete", structuredContent: receipt }, true],
    ["isError false", { resultType: "complete", isError: false, structuredContent: receipt }, true],
    ["isError true", { resultType: "complete", isError: true, structuredContent: receipt }, false],
    ["isError not a boolean", { resultType: "complete", isError: "false", structuredContent: receipt }, false],
    ["resultType input_required", { resultType: "input_required", structuredContent: receipt }, false],
    ["text content only", { resultType: "complete", content: [{ type: "text", text: "{}" }] }, false]
  ]
  for (const [name, result, accepted] of results) {
    it(`${name}: the client ${accepted ? "accepts" : "refuses"} it, and so does the check's reading`, () => {
      const client = fromJsonBody("leads.create", 200, id, JSON.stringify({ jsonrpc: "2.0", id, result }))
      const check = readAnswer(exchange(id, { jsonrpc: "2.0", id, result }))!.reading
      expect([Either.isRight(client), check._tag === "Receipt"]).toEqual([accepted, accepted])
      if (accepted) expect([Either.getOrThrow(client), check._tag === "Receipt" && check.receipt]).toEqual([receipt, receipt])
    })
  }
})

/** A recorded 200 answer to the tools/call `id`, as the conformance check sees it on the wire. */
const exchange = (id: string, ...messages: ReadonlyArray<unknown>): Exchange => {
  const sse = messages.length > 1
  const body = sse ? messages.map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join("") : JSON.stringify(messages[0])
  return {
    purpose: "bridge",
    url: "https://bridge.example/mcp",
    requestHeaders: { "mcp-name": "svc_appointments_create" },
    requestBody: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call" }),
    withoutCredential: false,
    expectsRefusal: false,
    response: {
      status: 200,
      headers: { "content-type": sse ? "text/event-stream" : "application/json" },
      body: new TextEncoder().encode(body),
      durationMs: 1
    },
    error: undefined,
    durationMs: 1
  }
}

/** What the client makes of an answer, in words the table compares. */
const clientSays = (result: Either.Either<unknown, BridgeError>): string =>
  Either.match(result, {
    onRight: () => "receipt",
    onLeft: (e) =>
      e._tag === "Conflict"
        ? `409 conflict`
        : e._tag === "Permanent" && e.kind === "tool_error"
        ? "refused, permanent, no status"
        : e._tag === "Permanent" && e.kind === "protocol"
        ? "unusable"
        : `${e._tag} ${e.status}`
  })

/** What the check's reading makes of it, in the same words. */
const checkSays = (reading: Reading): string =>
  reading._tag === "Receipt"
    ? "receipt"
    : reading._tag === "Refusal"
    ? reading.status === 409 ? "409 conflict" : `status ${reading.status}`
    : reading._tag === "ToolError"
    ? "refused, permanent, no status"
    : reading._tag === "Unusable"
    ? "unusable"
    : "notification"

describe("Refusing over MCP (docs/building-a-bridge.md): the client and the check classify the same answers alike, through one reading", () => {
  const id = "q".repeat(24)
  const booked = { id: "ap-1", confirmed: true, start: "2026-03-02T09:00:00Z", end: "2026-03-02T10:00:00Z", timezone: "Etc/UTC" }
  const text = [{ type: "text", text: "That slot is taken." }]
  const answers: ReadonlyArray<readonly [string, ReadonlyArray<unknown>, string]> = [
    ["a success", [{ jsonrpc: "2.0", id, result: { resultType: "complete", structuredContent: booked, content: text } }], "receipt"],
    ["a bare isError (the official SDK's default)", [{ jsonrpc: "2.0", id, result: { resultType: "complete", isError: true, content: text } }], "refused, permanent, no status"],
    ["isError with structuredContent {status: 409}", [{ jsonrpc: "2.0", id, result: { resultType: "complete", isError: true, content: text, structuredContent: { status: 409 } } }], "409 conflict"],
    ["a JSON-RPC error", [{ jsonrpc: "2.0", id, error: { code: -32000, message: "Slot taken." } }], "unusable"],
    [
      "a server request before the result",
      [
        { jsonrpc: "2.0", id: "srv-1", method: "elicitation/create", params: {} },
        { jsonrpc: "2.0", id, result: { resultType: "complete", structuredContent: booked } }
      ],
      "unusable"
    ]
  ]
  for (const [name, messages, expected] of answers) {
    it(`${name}: ${expected}`, () => {
      const wire = exchange(id, ...messages)
      const bodyText = new TextDecoder().decode(wire.response!.body)
      const client = messages.length > 1
        ? fromEventStream("appointments.create", 200, id, bodyText)
        : fromJsonBody("appointments.create", 200, id, bodyText)
      expect([clientSays(client), checkSays(readAnswer(wire)!.reading)]).toEqual([expected, expected])
      // A refusal of any shape is never a confirmed write.
      if (expected !== "receipt") expect(Either.isLeft(client)).toBe(true)
    })
  }
  it("an in-band status reads as the same HTTP status: 429 and 503 transient, 401 the credential, 400 permanent", () => {
    const statuses = [429, 503, 401, 400].map((status) =>
      fromJsonBody("leads.create", 200, id, JSON.stringify({ jsonrpc: "2.0", id, result: { resultType: "complete", isError: true, structuredContent: { status } } }))
    )
    expect(statuses.map((r) => Either.isLeft(r) ? [r.left._tag, r.left.status] : "receipt")).toEqual([
      ["Transient", 429],
      ["Transient", 503],
      ["Auth", 401],
      ["Permanent", 400]
    ])
  })
})

layer(SdkBridge.layer, { excludeTestServices: true })("a bridge on the official MCP SDK (@modelcontextprotocol/server)", (it) => {
  const check = (auth: "api_key" | "oauth") =>
    Effect.gen(function*() {
      const bridge = yield* SdkBridge.SdkBridge
      yield* (yield* TokenCache).clear
      return yield* Conformance.run({ connection: connection(bridge, auth), writes: true, otherTenant })
    })

  /** The verdict of every check, by id. */
  const verdicts = (report: Contract.Report) => Object.fromEntries(report.checks.map((c) => [c.id, c.status]))

  for (const auth of ["api_key", "oauth"] as const) {
    it.effect(`${auth}: earns the write level; the SDK's omitted isError and its bare isError for a taken slot only WARN`, () =>
      Effect.gen(function*() {
        const report = yield* check(auth)
        expect(report.checks.filter((c) => c.status === "fail").map((c) => `${c.id}: ${c.detail}`)).toEqual([])
        expect(report.checks.filter((c) => c.status === "skip").map((c) => c.id)).toEqual([])
        expect(report).toMatchObject({ earned_level: "writes", requested_level: "writes", passed: true, credential: auth })
        const toolResult = report.checks.find((c) => c.id === "mcp.tool_result")!
        expect(toolResult).toMatchObject({ status: "warn", rule: RULE })
        expect(toolResult.detail).toMatch(/omitted isError, which MCP's schema makes optional \(default false\)/)
        expect(toolResult.hint).toMatch(/send isError: false explicitly/)
        // The check's own booking of the taken slot was refused the SDK's way: a WARN naming the fix, not a malformed answer.
        const conflict = report.checks.find((c) => c.id === "appointments.create.conflict")!
        expect(conflict).toMatchObject({ status: "warn" })
        expect(conflict.detail).toMatch(/refused with a bare tool error \(isError: true naming no status/)
        expect(conflict.hint).toMatch(/structuredContent: \{status: 409\}/)
        expect(conflict.evidence.map((e) => e.received)).toEqual([expect.stringMatching(/^200 application\/json id=.* isError=true structuredContent missing$/)])
        expect(report.checks.filter((c) => c.status === "warn").map((c) => c.id)).toEqual(["mcp.tool_result", "appointments.create.conflict"])
        expect(report.counts).toMatchObject({ warn: 2, fail: 0, skip: 0 })
        // The SDK really answered without isError: the evidence shows the wire, not a decoded default.
        const received = report.checks.flatMap((c) => c.evidence.map((e) => e.received))
        expect(received.some((r) => r.includes("isError=absent (false) structuredContent {"))).toBe(true)
        expect(received.some((r) => r.includes("isError=false"))).toBe(false)
      }))
  }

  it.effect("Deterministic: ten runs in a row against one bridge earn the write level with the same verdicts, though each books a slot of a three-slot week and leaves it", () =>
    Effect.gen(function*() {
      const runs: Array<Record<string, string>> = []
      for (let run = 0; run < 10; run++) {
        const report = yield* check(run % 2 === 0 ? "api_key" : "oauth")
        expect(report).toMatchObject({ earned_level: "writes", passed: true })
        runs.push(verdicts(report))
      }
      expect(runs.filter((v) => JSON.stringify(v) === JSON.stringify(runs[0]))).toHaveLength(10)
      expect(runs[0]).toMatchObject({ "appointments.create.confirmed": "pass", "appointments.create.conflict": "warn", "mcp.tool_result": "warn" })
    }))

  it.effect("Deterministic: a second run against a bridge that holds the first run's records (its booking included) gets the first run's verdicts", () =>
    Effect.gen(function*() {
      const first = yield* check("api_key")
      const second = yield* check("api_key")
      expect(verdicts(second)).toEqual(verdicts(first))
      // The second run booked another slot: the first's is taken, and the check neither failed nor skipped for it.
      const booked = (r: Contract.Report) => r.checks.find((c) => c.id === "appointments.create.confirmed")!.detail
      expect(booked(second)).not.toEqual(booked(first))
    }))

  it.effect("a WARN passes in every output: JSON (counts.warn), text (WARN with rule and hint) and JUnit (a passing case that says WARN)", () =>
    Effect.gen(function*() {
      const report = yield* check("api_key")
      expect(Schema.decodeUnknownSync(Contract.Report)(JSON.parse(JSON.stringify(report)))).toEqual(report)
      const text = ConformanceReport.text(report)
      expect(text).toMatch(/ {2}WARN {2}mcp\.tool_result +Every successful answer was a complete result/)
      expect(text).toContain(`rule (MCP transport): ${RULE}`)
      expect(text).toContain("hint: Nothing to fix for crm-relay; to meet the contract's wording, send isError: false explicitly")
      expect(text).toContain("Verdict: PASSED — the bridge earns the writes level (asked: writes)")
      expect(text).toContain("2 warned (not failures), 0 failed, 0 skipped.")
      const xml = ConformanceReport.junit(report)
      expect(xml).toContain(`failures="0"`)
      expect(xml).not.toContain("<failure ")
      expect(xml).toMatch(/<testcase classname="svc\.crm\.v1\.read-only" name="mcp\.tool_result" time="[\d.]+"><system-out>WARN: Every successful answer/)
    }))

  it.effect("the client pushes a contact, a lead and a booking through the SDK bridge (isError absent read as false)", () =>
    Effect.gen(function*() {
      const bridge = yield* SdkBridge.SdkBridge
      for (const auth of ["api_key", "oauth"] as const) {
        yield* (yield* TokenCache).clear
        const client = Context.get(yield* Layer.build(connectionLayer(connection(bridge, auth))), BridgeClient)
        const contact = yield* client.contactsUpsert(Samples.contact)
        expect(contact.id.length).toBeGreaterThan(0)
        const lead = yield* client.leadsCreate({ ...Samples.lead, call_id: `call-${auth}` })
        expect(lead.id.length).toBeGreaterThan(0)
        const slots = yield* client.availabilityList(Samples.window)
        const slot = slots.slots[auth === "api_key" ? 0 : 1]!
        const booked = yield* client.appointmentsCreate({
          ...Samples.appointment,
          contact_external_id: contact.id,
          start: slot.start,
          end: slot.end
        })
        expect(booked).toMatchObject({ confirmed: true, start: slot.start, end: slot.end })
      }
    }).pipe(Effect.scoped))
})
