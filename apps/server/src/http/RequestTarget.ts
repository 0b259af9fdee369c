/**
 * The absolute-form request target a client behind a forward proxy sends
 * (`POST http://host/subscribe`), which RFC 9112 §3.2.2 says a server MUST
 * accept, read as its origin-form: the path and query exactly as received
 * (no URL normalisation, so a near-miss path stays a near miss), and the
 * target's authority in place of the received Host (§3.2.2: the server "MUST
 * ignore the received Host header field ... and instead use the host
 * information of the request-target").
 */

/** How a raw request target reads. */
export type Reading =
  /** Origin-form, asterisk-form or anything the router judges itself: left as received. */
  | { readonly _tag: "AsReceived" }
  /** Absolute-form with an http(s) scheme and a valid authority. */
  | { readonly _tag: "Absolute"; readonly authority: string; readonly originForm: string }
  /** Absolute-form the server cannot serve: answered 400 with `error`. */
  | { readonly _tag: "Invalid"; readonly error: string }

const AS_RECEIVED: Reading = { _tag: "AsReceived" }

/** `scheme "://" authority rest`, rest being path-abempty and query as received (RFC 3986 §3). */
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s

/**
 * RFC 3986 §3.2.2 host (IP-literal, or reg-name/IPv4 of unreserved, pct-encoded and sub-delims),
 * then an optional port of digits. No userinfo: RFC 9110 §4.2.4 says to treat it as an error.
 */
const AUTHORITY = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+)(?::[0-9]*)?$/

/** The invalid readings' sentences (public: tests quote them). */
export const errors = {
  scheme: "The request target must be a path, or an http or https URL (RFC 9112 §3.2.2).",
  authority: "The request target's host is missing or not valid (RFC 9110 §4.2)."
} as const

/** Reads the raw request target `target` (see the module comment). */
export const read = (target: string): Reading => {
  if (target.startsWith("/") || target === "*") return AS_RECEIVED
  const absolute = ABSOLUTE.exec(target)
  if (absolute === null) return AS_RECEIVED
  const authority = absolute[2]!
  const rest = absolute[3]!
  const lower = absolute[1]!.toLowerCase()
  if (lower !== "http" && lower !== "https") return { _tag: "Invalid", error: errors.scheme }
  // RFC 9110 §4.2.1: "A recipient that processes such a URI reference [an empty host] MUST reject it as invalid."
  if (!AUTHORITY.test(authority)) return { _tag: "Invalid", error: errors.authority }
  // RFC 9112 §3.2.1: an empty path is sent as "/" in the origin-form.
  return { _tag: "Absolute", authority, originForm: rest.startsWith("/") ? rest : `/${rest}` }
}
