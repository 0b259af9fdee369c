/**
 * Checks an outbound request before anything is sent: the URL's scheme,
 * userinfo, query and fragment, a literal-IP host, the headers egress owns,
 * and the body size. Pure: either a request ready for undici or a refusal.
 */
import { Either, Redacted } from "effect"
import { isIP } from "node:net"
import type * as AddressPolicy from "../../AddressPolicy.js"
import { addressRefusal } from "./addressRefusal.js"
import { EgressRefused, MAX_BODY_BYTES } from "./EgressError.js"

/** HTTP methods egress sends. */
export type EgressMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

/** Per-call rules. */
export interface EgressRequestOptions {
  /**
   * Allow a query string in the URL (webhook receivers may carry one).
   * Default `false`: bridge and token URLs with a query string or fragment are
   * refused. A fragment is never sent either way.
   */
  readonly allowQuery?: boolean
  /** What the call is for, for logs: "bridge", "oauth_token", "webhook". */
  readonly purpose?: string
  /**
   * `read` (default): the whole body is read (at most 1 MiB) and an encoded
   * one is refused. `discard`: only the status and headers matter (a webhook
   * receiver's answer); the exchange ends with the response head, and the
   * body is drained unread and undecoded up to 1 MiB, then dropped with the
   * connection.
   */
  readonly responseBody?: "read" | "discard"
}

/** One outbound HTTPS request. */
export interface EgressRequest {
  readonly method: EgressMethod
  readonly url: string
  /**
   * Request headers. Secret values may be `Redacted`; they are revealed only
   * when handed to the socket. Egress owns Host, Accept-Encoding,
   * Content-Length, Transfer-Encoding and the hop-by-hop headers.
   */
  readonly headers?: Readonly<Record<string, string | Redacted.Redacted<string>>> | undefined
  readonly body?: Uint8Array | string | undefined
  readonly options?: EgressRequestOptions | undefined
}

/** A checked request, ready for undici. */
export interface PreparedRequest {
  /** The URL's host name, as logs and errors show it. */
  readonly host: string
  readonly origin: string
  readonly path: string
  readonly method: EgressMethod
  readonly headers: Record<string, string>
  readonly body: Uint8Array | string | undefined
  readonly purpose: string
  readonly discardBody: boolean
}

// Headers whose value egress decides (or that would let a caller steer the
// connection: Host picks the TLS server name in undici).
const OWNED_HEADERS = new Set([
  "host",
  "accept-encoding",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "upgrade",
  "expect"
])

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
// Visible ASCII, obs-text, space and tab; no CR, LF or NUL.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

const bodyBytes = (body: Uint8Array | string | undefined): number =>
  body === undefined ? 0 : typeof body === "string" ? Buffer.byteLength(body, "utf8") : body.byteLength

const prepareHeaders = (
  host: string,
  headers: EgressRequest["headers"]
): Either.Either<Record<string, string>, EgressRefused> => {
  const out: Record<string, string> = {}
  for (const [name, raw] of Object.entries(headers ?? {})) {
    const lower = name.toLowerCase()
    if (!TOKEN.test(name)) {
      return Either.left(new EgressRefused({ reason: "invalid_request", host, detail: "a header name is not a valid token" }))
    }
    if (OWNED_HEADERS.has(lower)) {
      return Either.left(new EgressRefused({ reason: "invalid_request", host, detail: `the ${lower} header is set by egress, not by the caller` }))
    }
    const value = Redacted.isRedacted(raw) ? Redacted.value(raw) : raw
    if (!FIELD_VALUE.test(value)) {
      return Either.left(new EgressRefused({ reason: "invalid_request", host, detail: `the ${lower} header value contains control characters` }))
    }
    out[lower] = value
  }
  out["accept-encoding"] = "identity"
  return Either.right(out)
}

/** Where a request goes, once its URL passed the URL rules and the address policy (literal hosts). */
export interface PreparedTarget {
  readonly host: string
  readonly origin: string
  /** Path and, when allowed, query; never the fragment. */
  readonly path: string
}

/**
 * Checks a URL against the URL rules and the address policy (literal hosts).
 * Pure: the same URL, policy and `allowQuery` always give the same answer,
 * so a caller may keep it (webhooks go to the same few URLs again and again).
 */
export const prepareTarget = (
  policy: AddressPolicy.AddressPolicy,
  target: string,
  allowQuery: boolean
): Either.Either<PreparedTarget, EgressRefused> => {
  const url = URL.parse(target)
  if (url === null) return Either.left(new EgressRefused({ reason: "invalid_url", host: "" }))
  const host = url.hostname
  if (url.protocol !== "https:") {
    return Either.left(new EgressRefused({ reason: "not_https", host, detail: url.protocol.replace(/:$/, "://") }))
  }
  if (url.username !== "" || url.password !== "") {
    return Either.left(new EgressRefused({ reason: "url_credentials", host }))
  }
  // The serialized URL keeps an empty "?" or "#", so test the text, not search/hash.
  const hashAt = url.href.indexOf("#")
  const hasFragment = hashAt !== -1
  const hasQuery = (hasFragment ? url.href.slice(0, hashAt) : url.href).includes("?")
  if (!allowQuery && (hasQuery || hasFragment)) {
    const detail = hasQuery && hasFragment ? "query string and fragment" : hasQuery ? "query string" : "fragment"
    return Either.left(new EgressRefused({ reason: "query_or_fragment", host, detail }))
  }
  // Literal-IP hosts never reach the DNS lookup, so judge them here (and again at connect).
  const bare = host.startsWith("[") ? host.slice(1, -1) : host
  if (isIP(bare) !== 0) {
    const refusal = addressRefusal(policy, host, bare)
    if (refusal !== undefined) return Either.left(refusal)
  }
  // The fragment is never sent.
  return Either.right({ host, origin: url.origin, path: `${url.pathname}${allowQuery ? url.search : ""}` })
}

/**
 * Checks `request` against the URL rules, the address policy (literal hosts) and the body limit;
 * `target` is `prepareTarget`'s answer for its URL when the caller keeps them.
 */
export const prepareRequest = (
  policy: AddressPolicy.AddressPolicy,
  request: EgressRequest,
  target: Either.Either<PreparedTarget, EgressRefused> = prepareTarget(policy, request.url, request.options?.allowQuery ?? false)
): Either.Either<PreparedRequest, EgressRefused> => {
  if (Either.isLeft(target)) return Either.left(target.left)
  const { host, origin, path } = target.right
  const size = bodyBytes(request.body)
  if (size > MAX_BODY_BYTES) {
    return Either.left(new EgressRefused({ reason: "request_too_large", host, detail: `${size} bytes` }))
  }
  return Either.map(prepareHeaders(host, request.headers), (headers) => ({
    host,
    origin,
    path,
    method: request.method,
    headers,
    body: request.body,
    purpose: request.options?.purpose ?? "unspecified",
    discardBody: request.options?.responseBody === "discard"
  }))
}
