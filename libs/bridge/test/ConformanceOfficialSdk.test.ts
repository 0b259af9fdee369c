/**
 * One reading of the MCP answer. A bridge built on the official MCP
 * TypeScript SDK omits `isError` when a tool succeeds (MCP's schema makes it
 * optional, default false): crm-relay's client pushes through it, and the
 * conformance check reads its answers the same way — it earns the write level
 * with an API key and with OAuth, and the contract's stricter wording
 * ("isError false on success") is a WARN with a hint, never a FAIL.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Redacted, Schema } from "effect"
import { Conformance as Contract } from "@crm-relay/contract"
import { connectionLayer } from "../src/BridgeClients.js"
import { BridgeClient } from "../src/BridgeClient.js"
import * as Conformance from "../src/Conformance.js"
import * as ConformanceReport from "../src/ConformanceReport.js"
import type { Connection } from "../src/Connection.js"
import { fromJsonBody, rawToolResultReceipt } from "../src/internal/mcpAnswer.js"
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
      const check = rawToolResultReceipt(result)
      expect([Either.isRight(client), Either.isRight(check)]).toEqual([accepted, accepted])
      if (accepted) expect([Either.getOrThrow(client), Either.getOrThrow(check)]).toEqual([receipt, receipt])
    })
  }
})

layer(SdkBridge.layer, { excludeTestServices: true })("a bridge on the official MCP SDK (@modelcontextprotocol/server)", (it) => {
  const check = (auth: "api_key" | "oauth") =>
    Effect.gen(function*() {
      const bridge = yield* SdkBridge.SdkBridge
      yield* (yield* TokenCache).clear
      return yield* Conformance.run({ connection: connection(bridge, auth), writes: true, otherTenant })
    })

  for (const auth of ["api_key", "oauth"] as const) {
    it.effect(`${auth}: earns the write level; the rule's "isError false on success" only WARNs that the SDK omits isError`, () =>
      Effect.gen(function*() {
        const report = yield* check(auth)
        expect(report.checks.filter((c) => c.status === "fail").map((c) => `${c.id}: ${c.detail}`)).toEqual([])
        expect(report.checks.filter((c) => c.status === "skip").map((c) => c.id)).toEqual([])
        expect(report).toMatchObject({ earned_level: "writes", requested_level: "writes", passed: true, credential: auth })
        const toolResult = report.checks.find((c) => c.id === "mcp.tool_result")!
        expect(toolResult).toMatchObject({ status: "warn", rule: RULE })
        expect(toolResult.detail).toMatch(/omitted isError, which MCP's schema makes optional \(default false\)/)
        expect(toolResult.hint).toMatch(/send isError: false explicitly/)
        expect(report.checks.filter((c) => c.status === "warn").map((c) => c.id)).toEqual(["mcp.tool_result"])
        expect(report.counts).toMatchObject({ warn: 1, fail: 0, skip: 0 })
        // The SDK really answered without isError: the evidence shows the wire, not a decoded default.
        const received = report.checks.flatMap((c) => c.evidence.map((e) => e.received))
        expect(received.some((r) => r.includes("isError=absent (false) structuredContent {"))).toBe(true)
        expect(received.some((r) => r.includes("isError=false"))).toBe(false)
      }))
  }

  it.effect("a WARN passes in every output: JSON (counts.warn), text (WARN with rule and hint) and JUnit (a passing case that says WARN)", () =>
    Effect.gen(function*() {
      const report = yield* check("api_key")
      expect(Schema.decodeUnknownSync(Contract.Report)(JSON.parse(JSON.stringify(report)))).toEqual(report)
      const text = ConformanceReport.text(report)
      expect(text).toMatch(/ {2}WARN {2}mcp\.tool_result +Every successful answer was a complete result/)
      expect(text).toContain(`rule (MCP transport): ${RULE}`)
      expect(text).toContain("hint: Nothing to fix for crm-relay; to meet the contract's wording, send isError: false explicitly")
      expect(text).toContain("Verdict: PASSED — the bridge earns the writes level (asked: writes)")
      expect(text).toContain("1 warned (not failures), 0 failed, 0 skipped.")
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
