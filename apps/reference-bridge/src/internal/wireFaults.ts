/**
 * Faults applied to a finished HTTP answer, whatever the transport: an
 * oversize body, gzip encoding, malformed JSON, an empty body.
 */
import { HttpServerResponse } from "@effect/platform"
import { Option } from "effect"
import { gzipSync } from "node:zlib"

/** 1 MiB, the contract's request and response body limit. */
export const ONE_MIB = 1024 * 1024

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The buffered body of a response, when it has one this module can rewrite. */
export const bodyOf = (
  response: HttpServerResponse.HttpServerResponse
): Option.Option<{ readonly bytes: Uint8Array; readonly contentType: string }> => {
  const body = response.body
  switch (body._tag) {
    case "Uint8Array":
      return Option.some({ bytes: body.body, contentType: body.contentType })
    case "Empty":
      return Option.some({ bytes: new Uint8Array(), contentType: "application/json" })
    default:
      return Option.none()
  }
}

/** The headers of `response` without those that describe its old body. */
const keptHeaders = (response: HttpServerResponse.HttpServerResponse): Record<string, string> => {
  const { "content-length": _length, "content-type": _type, ...rest } = response.headers
  return rest
}

/** `response` with a new body (status and other headers kept). */
export const withBody = (
  response: HttpServerResponse.HttpServerResponse,
  bytes: Uint8Array,
  contentType: string,
  headers: Record<string, string> = {}
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.uint8Array(bytes, {
    status: response.status,
    headers: { ...keptHeaders(response), ...headers },
    contentType
  })

const isSse = (contentType: string): boolean => contentType.startsWith("text/event-stream")

/** Pads a body past `size` bytes without changing what it means: an unknown JSON field, or an SSE comment. */
export const oversize = (text: string, contentType: string, size: number): string => {
  const padding = "x".repeat(Math.max(0, size - text.length))
  if (isSse(contentType)) return `: ${padding}\n\n${text}`
  const trimmed = text.trimStart()
  if (trimmed.startsWith("{")) {
    const rest = trimmed.slice(1).trimStart()
    return `{"padding":"${padding}"${rest.startsWith("}") ? "" : ","}${rest}`
  }
  return text + " ".repeat(padding.length)
}

/** The same answer with its (last) JSON document cut short by one character. */
export const malformed = (text: string, contentType: string): string => {
  if (!isSse(contentType)) return text.trimEnd().slice(0, -1)
  const lines = text.split("\n")
  const last = lines.map((l) => l.startsWith("data:")).lastIndexOf(true)
  if (last >= 0) lines[last] = lines[last]!.slice(0, -1)
  return lines.join("\n")
}

/** Applies a body-rewriting fault to a buffered response. */
export const rewrite = (
  response: HttpServerResponse.HttpServerResponse,
  fault: "Oversize" | "Gzip" | "MalformedJson" | "EmptyBody",
  oversizeBytes: number
): HttpServerResponse.HttpServerResponse => {
  const body = bodyOf(response)
  if (Option.isNone(body)) return response
  const { bytes, contentType } = body.value
  switch (fault) {
    case "Oversize":
      return withBody(response, encoder.encode(oversize(decoder.decode(bytes), contentType, oversizeBytes)), contentType)
    case "Gzip":
      return withBody(response, gzipSync(bytes), contentType, { "content-encoding": "gzip" })
    case "MalformedJson":
      return withBody(response, encoder.encode(malformed(decoder.decode(bytes), contentType)), contentType)
    case "EmptyBody":
      return HttpServerResponse.empty({
        status: response.status,
        headers: { ...keptHeaders(response), "content-type": contentType }
      })
  }
}
