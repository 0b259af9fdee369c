/**
 * Transport rules and limits, judged over every exchange of the run (so they
 * run last): no redirects, no compression, JSON answers (REST), stateless
 * tools/call with headers equal to the body, JSON or SSE framing, the request
 * id echoed and complete tool results (MCP, read as the client reads them),
 * and the 10 s deadline.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, Redacted } from "effect"
import { Mcp, Operations, Values } from "@crm-relay/contract"
import { Permanent } from "../../BridgeError.js"
import { makeRequestId, META } from "../../McpTransport.js"
import type { Reading } from "../mcpAnswer.js"
import { readMessage } from "../mcpAnswer.js"
import type { Check, Setup } from "./check.js"
import { common, fail, isRecord, pass, skip, transportCheckOf, warn } from "./check.js"
import type { Exchange } from "./recorder.js"
import { expectingRefusal, label } from "./recorder.js"

const bridgeExchanges = (setup: Setup) =>
  Effect.map(setup.exchanges, (all) => all.filter((e) => e.purpose === "bridge"))

const mediaType = (e: Exchange) => (e.response?.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
const is2xx = (e: Exchange) => e.response !== undefined && e.response.status >= 200 && e.response.status <= 299

const decodeMessage = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Whether a JSON-RPC answer (JSON or SSE) of this exchange matches `test`. */
const mcpMessages = (e: Exchange): ReadonlyArray<unknown> => {
  if (e.response === undefined) return []
  const text = new TextDecoder().decode(e.response.body)
  return mediaType(e) === "text/event-stream"
    ? text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => decodeMessage(l.slice(5).trim()))
    : [decodeMessage(text)]
}

const finalMessage = (e: Exchange): Record<string, unknown> | undefined =>
  mcpMessages(e).find((m): m is Record<string, unknown> => isRecord(m) && ("result" in m || "error" in m) && !("method" in m))

const requestIdOf = (e: Exchange): unknown => {
  const body = decodeMessage(e.requestBody)
  return isRecord(body) ? body["id"] : undefined
}

/**
 * The check's reading of an MCP answer: its messages in order through the client's own `readMessage`, the
 * first that is not a notification decides (with the raw `result` it read). None when no frame is JSON
 * (left to mcp.framing).
 */
export const readAnswer = (e: Exchange): { readonly reading: Reading; readonly result: unknown } | undefined => {
  for (const message of mcpMessages(e)) {
    if (message === undefined) continue
    const reading = readMessage(message, requestIdOf(e))
    if (reading._tag !== "Notification") return { reading, result: isRecord(message) ? message["result"] : undefined }
  }
  return undefined
}

export const transportChecks = (): ReadonlyArray<Check> => [
  {
    id: "transport.no_redirects",
    level: "read-only",
    section: "Errors",
    rule: "| Other 4xx, and redirects | Permanent configuration or data failure. Redirects are not followed. |",
    hint: "Serve every operation at its own URL; answer directly instead of redirecting.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const redirects = all.filter((e) => e.response !== undefined && e.response.status >= 300 && e.response.status <= 399)
        return redirects.length === 0
          ? pass(`None of ${all.length} answers was a redirect.`)
          : fail(`${redirects.length} answer(s) were redirects (${redirects.map((e) => `${label(e)} ${e.response!.status}`).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "transport.uncompressed",
    level: "read-only",
    section: "Limits (transport rules)",
    rule: "responses are uncompressed JSON or uncompressed MCP SSE.",
    hint: "Turn response compression off for the bridge (requests say Accept-Encoding: identity).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const encoded = all.filter((e) =>
          e.error?._tag === "EgressEncodingRefused" ||
          (e.response !== undefined && !["", "identity"].includes((e.response.headers["content-encoding"] ?? "").trim().toLowerCase()))
        )
        return encoded.length === 0
          ? pass(`None of ${all.length} answers was compressed.`)
          : fail(`${encoded.length} answer(s) were compressed (${encoded.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "rest.json_answers",
    level: "read-only",
    transport: "rest",
    section: "Endpoints",
    rule: "Bodies and responses are JSON objects.",
    hint: "Answer every successful operation with Content-Type: application/json and a JSON object body.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        if (!all.some(is2xx)) return skip("No successful answer to judge.")
        const bad = all.filter(is2xx).filter((e) => {
          if (mediaType(e) !== "application/json") return true
          return !isRecord(decodeMessage(new TextDecoder().decode(e.response!.body)))
        })
        return bad.length === 0
          ? pass(`Every successful answer (${all.filter(is2xx).length}) was a JSON object with Content-Type application/json.`)
          : fail(`${bad.length} successful answer(s) were not JSON objects with Content-Type application/json (${bad.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.stateless",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Unsupported: initialize or session exchange, tool discovery, resources, prompts, sampling, elicitation, browser sign-in, input-required conversations.",
    hint: "Serve tools/call statelessly: no initialize first, no Mcp-Session-Id, one request and its answer.",
    run: (setup, state) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const sessions = all.filter((e) => e.response?.headers["mcp-session-id"] !== undefined)
        if (sessions.length > 0) return fail(`${sessions.length} answer(s) handed out an Mcp-Session-Id.`)
        return state.capabilities !== undefined && Either.isRight(state.capabilities)
          ? pass("tools/call was answered without initialize and without a session.")
          : skip("The first tools/call did not answer a receipt (see capabilities.version).")
      })
  },
  {
    id: "mcp.headers_match_body",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "The protocol version, method and tool name headers must match the JSON body.",
    hint: "Refuse (400) a tools/call whose Mcp-Name, Mcp-Method or MCP-Protocol-Version header disagrees with its body.",
    run: (setup) =>
      Effect.gen(function*() {
        // Body: a contacts.search no contact can match; header: capabilities. Both read-only: nothing is written either way.
        const body: Mcp.ToolsCallRequest = {
          jsonrpc: "2.0",
          id: Values.JsonRpcId.make(makeRequestId()),
          method: "tools/call",
          params: {
            name: Operations.TOOL_NAMES["contacts.search"],
            arguments: { ...common(setup), phone: "", email: `crm-relay-conformance-${randomBytes(8).toString("hex")}@example.invalid` },
            _meta: META
          }
        }
        const result = yield* expectingRefusal(Effect.either(setup.credentials.authorize("capabilities", (bearer) =>
          setup.egress.send({
            method: "POST",
            url: setup.url,
            headers: {
              "content-type": "application/json",
              "accept": Mcp.MCP_ACCEPT,
              "authorization": Redacted.make(`Bearer ${Redacted.value(bearer)}`),
              "mcp-protocol-version": Values.MCP_PROTOCOL_VERSION,
              "mcp-method": "tools/call",
              "mcp-name": Operations.TOOL_NAMES["capabilities"]
            },
            body: JSON.stringify(body),
            options: { purpose: "bridge" }
          }).pipe(Effect.mapError((error) =>
            new Permanent({
              operation: "capabilities",
              status: null,
              kind: error._tag === "EgressEncodingRefused" ? "encoding" : "egress_refused",
              message: error.message
            })
          )))))
        if (Either.isLeft(result)) {
          const other = transportCheckOf(setup, result.left)
          return other === undefined
            ? fail(`The mismatched request was not answered: ${result.left.message}`)
            : skip(`The answer broke a transport rule, reported by ${other}: ${result.left.message}`)
        }
        const status = result.right.status
        if (status >= 300 && status <= 399) return skip("The answer was a redirect, reported by transport.no_redirects.")
        if (status === 401) return skip("The bridge refused the credential (401) before judging the headers.")
        return status >= 400 && status <= 499
          ? pass(`A tools/call whose Mcp-Name disagrees with its body was refused (${status}).`)
          : fail(`A tools/call whose Mcp-Name header disagrees with its body was answered ${status}, not refused with a 4xx.`)
      })
  },
  {
    id: "mcp.framing",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response framing: a JSON body, or bounded request-scoped SSE data frames. Notifications without request IDs may precede the final response.",
    hint: "Answer tools/call as application/json (one JSON-RPC response) or text/event-stream (data frames ending with the response).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        if (!all.some(is2xx)) return skip("No successful answer to judge.")
        const bad = all.filter(is2xx).filter((e) => {
          const type = mediaType(e)
          if (type !== "application/json" && type !== "text/event-stream") return true
          return finalMessage(e) === undefined
        })
        return bad.length === 0
          ? pass(`Every successful answer (${all.filter(is2xx).length}) was JSON or SSE holding one final JSON-RPC response.`)
          : fail(`${bad.length} successful answer(s) were neither JSON nor SSE with a final JSON-RPC response (${bad.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.request_id",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object.",
    hint: "Echo the request's JSON-RPC id in the response, exactly.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const answered = all.filter(is2xx).flatMap((e) => {
          const final = finalMessage(e)
          return final === undefined ? [] : [{ e, final }]
        })
        if (answered.length === 0) return skip("No successful answer to judge.")
        const bad = answered.filter(({ e, final }) => final["id"] !== requestIdOf(e))
        return bad.length === 0
          ? pass(`Every response (${answered.length}) echoed its request id.`)
          : fail(`${bad.length} response(s) did not echo the request id (${bad.map(({ e }) => label(e)).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.tool_result",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object.",
    hint: "Answer a 2xx tools/call with result {resultType: \"complete\", isError: false, structuredContent: <REST receipt>}; no server requests.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        // Only answers to requests meant to succeed: a refusal the check provoked (a taken slot, a wrong credential) is judged by its own check.
        const meant = all.filter((e) => is2xx(e) && !e.expectsRefusal)
        if (meant.length === 0) return skip("No successful answer to judge.")
        const judged = meant.flatMap((e) => {
          const read = readAnswer(e)
          if (read === undefined) return [] // judged by mcp.framing
          const { reading, result } = read
          switch (reading._tag) {
            case "Receipt":
              return [{ e, bad: false, omitted: isRecord(result) && !("isError" in result) }]
            case "Refusal":
              return [] // an error status in a tool error, like a non-2xx answer: the operation's check reports it
            case "ToolError":
              return [{ e, bad: true, omitted: false }]
            case "Notification":
            case "Unusable":
              // A wrong id echo is mcp.request_id's.
              return reading._tag === "Unusable" && reading.why.includes("request id") ? [] : [{ e, bad: true, omitted: false }]
          }
        })
        const bad = judged.filter((j) => j.bad).map((j) => j.e)
        if (bad.length > 0) {
          return fail(`${bad.length} successful answer(s) were not a complete tool result with structuredContent (${bad.map(label).slice(0, 3).join(", ")}).`)
        }
        const omitted = judged.filter((j) => j.omitted).length
        return omitted === 0
          ? pass("Every successful answer was a complete result with isError false and structuredContent.")
          : warn(
            `Every successful answer was a complete result with structuredContent; ${omitted} omitted isError, which MCP's schema ` +
              "makes optional (default false) and crm-relay reads as false, while the contract's wording says \"isError false on success\".",
            "Nothing to fix for crm-relay; to meet the contract's wording, send isError: false explicitly on success (MCP SDKs omit it by default)."
          )
      })
  },
  {
    id: "latency.deadline",
    level: "read-only",
    section: "Limits",
    rule: "| Total deadline per HTTP exchange | 10 seconds |",
    hint: "Answer every operation well within 10 seconds (the service gives up at the deadline).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const limit = setup.latencyLimitMs
        const slowest = new Map<string, number>()
        for (const e of all) slowest.set(label(e), Math.max(slowest.get(label(e)) ?? 0, e.durationMs))
        const summary = [...slowest].map(([name, ms]) => `${name} ${Math.round(ms)} ms`).join(", ")
        const late = all.filter((e) => e.error?._tag === "EgressTimeout" || e.durationMs >= limit)
        return late.length === 0
          ? pass(`Slowest answer per operation: ${summary}.`)
          : fail(`${late.length} exchange(s) took ${limit / 1000} s or longer (${late.map(label).slice(0, 3).join(", ")}); slowest: ${summary}.`)
      })
  }
]
