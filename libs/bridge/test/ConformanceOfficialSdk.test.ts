/**
 * One reading of the MCP answer. A bridge built on the official MCP
 * TypeScript SDK omits `isError` when a tool succeeds (MCP's schema makes it
 * optional, default false): crm-relay's client pushes through it, and the
 * conformance check reads its answers the same way — it earns the write level
 * with an API key and with OAuth, and the contract's stricter wording
 * ("isError false on success") is a WARN with a hint, never a FAIL.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { fromJsonBody, rawToolResultReceipt } from "../src/internal/mcpAnswer.js"

const RULE = "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object."

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
