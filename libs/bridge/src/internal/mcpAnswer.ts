/**
 * Reads the answer to one MCP tools/call (contract "MCP transport"): a JSON
 * body or request-scoped SSE frames. Notifications before the final response
 * are skipped; a server request, a JSON-RPC error, a wrong id echo, a
 * resultType other than "complete" or a result without structuredContent
 * fails the operation. Plain text is never a receipt. `isError` absent means
 * false, as MCP's schema says.
 *
 * A refusal (docs/building-a-bridge.md, "Refusing over MCP"): `isError: true`
 * whose structuredContent names an error status (`{"status": 409}`) means what
 * that HTTP status means in the contract's error table; a bare `isError: true`
 * (what the official SDK sends) is a permanent failure, never a confirmed
 * write. The client and the conformance check read every message through the
 * one `readMessage`.
 */
import { Either, Option, Schema } from "effect"
import { createParser } from "eventsource-parser"
import { Mcp } from "@crm-relay/contract"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "../BridgeError.js"
import { Permanent } from "../BridgeError.js"
import { parseJson, statusError } from "./answers.js"

/** SSE frames are bounded like the body: egress caps the body at 1 MiB. */
const MAX_SSE_BUFFER = 1024 * 1024

const decodeMessage = Schema.decodeUnknownEither(Mcp.JsonRpcMessage)

/** What one JSON-RPC message of a tools/call answer is, read alike by the client and the conformance check. */
export type Reading =
  /** A notification: skipped. */
  | { readonly _tag: "Notification" }
  /** A complete result, isError false (or absent): its structuredContent is the receipt candidate. */
  | { readonly _tag: "Receipt"; readonly receipt: unknown }
  /** `isError: true` naming an error status (400–599): read as that status in the contract's error table. */
  | { readonly _tag: "Refusal"; readonly status: number }
  /** `isError: true` naming no status (the official SDK's default): refused, permanent, never a write. */
  | { readonly _tag: "ToolError" }
  /** Anything else: a server request, a JSON-RPC error, a wrong id, an incomplete result, text only. */
  | { readonly _tag: "Unusable"; readonly why: string }

/** The error status a tool error names in its structuredContent (`{"status": 409}`), if any. */
export const refusalStatus = (structuredContent: unknown): number | undefined => {
  if (structuredContent === null || typeof structuredContent !== "object" || !("status" in structuredContent)) return undefined
  const status = structuredContent.status
  return typeof status === "number" && Number.isInteger(status) && status >= 400 && status <= 599 ? status : undefined
}

/** A decoded tools/call result: a receipt, a refusal, or why it is unusable (to follow "The MCP answer to <op> …"). */
export const readToolResult = (result: Mcp.ToolResult): Reading => {
  if (result.resultType !== "complete") return { _tag: "Unusable", why: "is not a complete result" }
  if (result.isError) {
    const status = refusalStatus(result.structuredContent)
    return status === undefined ? { _tag: "ToolError" } : { _tag: "Refusal", status }
  }
  // Without structuredContent there is only text, which is never parsed into a receipt;
  // structuredContent that is not a receipt object is judged by the receipt checks.
  return result.structuredContent === undefined
    ? { _tag: "Unusable", why: "has no structuredContent; plain text is never parsed into a receipt" }
    : { _tag: "Receipt", receipt: result.structuredContent }
}

/** One JSON-RPC message (parsed JSON) of the answer to the tools/call whose id is `requestId`. */
export const readMessage = (json: unknown, requestId: unknown): Reading => {
  const decoded = decodeMessage(json)
  if (Either.isLeft(decoded)) return { _tag: "Unusable", why: "is not a JSON-RPC 2.0 message" }
  const message = decoded.right
  if ("method" in message) {
    return "id" in message && message.id !== undefined
      ? { _tag: "Unusable", why: "is a server request, which is unsupported" }
      : { _tag: "Notification" }
  }
  if ("error" in message) return { _tag: "Unusable", why: `is a JSON-RPC error (code ${message.error.code})` }
  if (message.id !== requestId) return { _tag: "Unusable", why: "does not echo the request id" }
  return readToolResult(message.result)
}

/** What a final reading means for the operation: the receipt candidate, or the failure. */
export const outcomeOf = (
  operation: Operations.OperationName,
  status: number,
  reading: Exclude<Reading, { readonly _tag: "Notification" }>
): Either.Either<unknown, BridgeError> => {
  switch (reading._tag) {
    case "Receipt":
      return Either.right(reading.receipt)
    case "Refusal":
      return Either.left(statusError(operation, reading.status, "the bridge", " in a tool error", undefined))
    case "ToolError":
      return Either.left(
        new Permanent({
          operation,
          status,
          kind: "tool_error",
          message: `The bridge refused ${operation} with a tool error (isError: true) naming no status: no receipt, not retried.`
        })
      )
    case "Unusable":
      return Either.left(protocolError(operation, status, reading.why))
  }
}

const protocolError = (operation: Operations.OperationName, status: number, why: string): Permanent =>
  new Permanent({ operation, status, kind: "protocol", message: `The MCP answer to ${operation} ${why}.` })

type Step = Either.Either<Option.Option<unknown>, BridgeError>

/** One message as a step of the client's reading: `none` to skip it, or the final outcome. */
const step = (operation: Operations.OperationName, status: number, requestId: string, json: unknown): Step => {
  const reading = readMessage(json, requestId)
  return reading._tag === "Notification"
    ? Either.right(Option.none())
    : Either.map(outcomeOf(operation, status, reading), Option.some)
}

/** The structuredContent of a JSON-body answer: exactly one final response. */
export const fromJsonBody = (
  operation: Operations.OperationName,
  status: number,
  requestId: string,
  text: string
): Either.Either<unknown, BridgeError> =>
  Either.flatMap(parseJson(operation, status, text, "the bridge"), (json) =>
    Either.flatMap(
      step(operation, status, requestId, json),
      Option.match({
        onNone: () => Either.left(protocolError(operation, status, "holds a notification but no final response")),
        onSome: Either.right
      })
    ))

/** The structuredContent of the final response in an SSE answer; earlier notifications are skipped. */
export const fromEventStream = (
  operation: Operations.OperationName,
  status: number,
  requestId: string,
  text: string
): Either.Either<unknown, BridgeError> => {
  let outcome: Either.Either<unknown, BridgeError> | undefined
  const parser = createParser({
    maxBufferSize: MAX_SSE_BUFFER,
    onEvent: (event) => {
      if (outcome !== undefined || event.data.trim() === "") return
      const next: Step = Either.flatMap(
        parseJson(operation, status, event.data, "the bridge"),
        (json) => step(operation, status, requestId, json)
      )
      if (Either.isLeft(next)) outcome = Either.left(next.left)
      else if (Option.isSome(next.right)) outcome = Either.right(next.right.value)
    },
    onError: (error) => {
      if (error.type === "max-buffer-size-exceeded" && outcome === undefined) {
        outcome = Either.left(protocolError(operation, status, "has an event larger than the stream bound"))
      }
    }
  })
  parser.feed(text)
  return outcome ?? Either.left(protocolError(operation, status, "ended without a final response"))
}
