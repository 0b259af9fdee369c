/**
 * Reads the answer to one MCP tools/call (contract "MCP transport"): a JSON
 * body or request-scoped SSE frames. Notifications before the final response
 * are skipped; a server request, a JSON-RPC error, a wrong id echo, a
 * resultType other than "complete", `isError: true` or a result without
 * structuredContent fails the operation. Plain text is never a receipt.
 * `isError` absent means false, as MCP's schema says: the client and the
 * conformance check read a result through the one `toolResultReceipt`.
 */
import { Either, Option, Schema } from "effect"
import { createParser } from "eventsource-parser"
import { Mcp } from "@crm-relay/contract"
import type { Operations } from "@crm-relay/contract"
import { Permanent } from "../BridgeError.js"
import { parseJson } from "./answers.js"

/** SSE frames are bounded like the body: egress caps the body at 1 MiB. */
const MAX_SSE_BUFFER = 1024 * 1024

const decodeMessage = Schema.decodeUnknownEither(Mcp.JsonRpcMessage)
const decodeToolResult = Schema.decodeUnknownEither(Mcp.ToolResult)

/**
 * The structuredContent of a tools/call result, or why it is no receipt (to
 * follow "The MCP answer to <operation> …"). The result is read with the
 * contract's `Mcp.ToolResult`, so an absent `isError` is false.
 */
export const toolResultReceipt = (result: Mcp.ToolResult): Either.Either<unknown, string> =>
  result.resultType !== "complete"
    ? Either.left("is not a complete result")
    : result.isError
    ? Either.left("is a tool error (isError: true)")
    // Without structuredContent there is only text, which is never parsed into a receipt;
    // structuredContent that is not a receipt object is judged by the receipt checks.
    : result.structuredContent === undefined
    ? Either.left("has no structuredContent; plain text is never parsed into a receipt")
    : Either.right(result.structuredContent)

/** `toolResultReceipt` of a raw (undecoded) `result` member, as the conformance check sees it on the wire. */
export const rawToolResultReceipt = (result: unknown): Either.Either<unknown, string> =>
  Either.match(decodeToolResult(result), {
    onLeft: () => Either.left("is not a tools/call result"),
    onRight: toolResultReceipt
  })

const protocolError = (operation: Operations.OperationName, status: number, why: string): Permanent =>
  new Permanent({ operation, status, kind: "protocol", message: `The MCP answer to ${operation} ${why}.` })

type Step = Either.Either<Option.Option<unknown>, Permanent>

/**
 * One JSON-RPC message: `none` to skip it (a notification), the
 * structuredContent of the final response, or the failure it stands for.
 */
const readMessage = (operation: Operations.OperationName, status: number, requestId: string, json: unknown): Step => {
  const decoded = decodeMessage(json)
  if (Either.isLeft(decoded)) return Either.left(protocolError(operation, status, "is not a JSON-RPC 2.0 message"))
  const message = decoded.right
  if ("method" in message) {
    return "id" in message && message.id !== undefined
      ? Either.left(protocolError(operation, status, "is a server request, which is unsupported"))
      : Either.right(Option.none())
  }
  if ("error" in message) {
    return Either.left(protocolError(operation, status, `is a JSON-RPC error (code ${message.error.code})`))
  }
  if (message.id !== requestId) {
    return Either.left(protocolError(operation, status, "does not echo the request id"))
  }
  return Either.match(toolResultReceipt(message.result), {
    onLeft: (why) => Either.left(protocolError(operation, status, why)),
    onRight: (receipt) => Either.right(Option.some(receipt))
  })
}

/** The structuredContent of a JSON-body answer: exactly one final response. */
export const fromJsonBody = (
  operation: Operations.OperationName,
  status: number,
  requestId: string,
  text: string
): Either.Either<unknown, Permanent> =>
  Either.flatMap(parseJson(operation, status, text, "the bridge"), (json) =>
    Either.flatMap(
      readMessage(operation, status, requestId, json),
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
): Either.Either<unknown, Permanent> => {
  let outcome: Either.Either<unknown, Permanent> | undefined
  const parser = createParser({
    maxBufferSize: MAX_SSE_BUFFER,
    onEvent: (event) => {
      if (outcome !== undefined || event.data.trim() === "") return
      const step = Either.flatMap(
        parseJson(operation, status, event.data, "the bridge"),
        (json) => readMessage(operation, status, requestId, json)
      )
      if (Either.isLeft(step)) outcome = step
      else if (Option.isSome(step.right)) outcome = Either.right(step.right.value)
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
