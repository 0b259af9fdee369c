/**
 * The closed set of egress failures. Each carries the host (never a URL
 * path, query or header) and reads as one sentence for the operator.
 */
import { Data } from "effect"

/** The egress body limit (both directions): 1 MiB. */
export const MAX_BODY_BYTES = 1024 * 1024

/** Every reason egress refuses a request (also the `reason` label's values of its refusal counter). */
export const REFUSAL_REASONS = [
  "invalid_url",
  "not_https",
  "url_credentials",
  "query_or_fragment",
  "private_address",
  "invalid_request",
  "request_too_large",
  "broker_scheme",
  "plain_broker"
] as const

/** Why egress refused to send a request. */
export type RefusalReason = typeof REFUSAL_REASONS[number]

/** The request was refused before (or instead of) being sent; retrying cannot help. */
export class EgressRefused extends Data.TaggedError("EgressRefused")<{
  readonly reason: RefusalReason
  /** The URL's host name ("" when the URL could not be parsed). */
  readonly host: string
  /** A short detail: the scheme, the offending header, the body size. */
  readonly detail?: string
  /** For `private_address`: the refused address. */
  readonly address?: string
  /** For `private_address`: the range it falls in, e.g. "loopback range 127.0.0.0/8". */
  readonly range?: string
}> {
  override get message(): string {
    const host = this.host === "" ? "the target" : this.host
    switch (this.reason) {
      case "invalid_url":
        return "The outbound URL is not a valid absolute URL."
      case "not_https":
        return `The URL for ${host} uses ${this.detail ?? "a scheme other than https"}; only https:// URLs are allowed.`
      case "url_credentials":
        return `The URL for ${host} carries credentials (user:password@); credentials belong in the connection settings, never in the URL.`
      case "query_or_fragment":
        return `The URL for ${host} carries a ${this.detail ?? "query string or fragment"}, which this URL must not have.`
      case "private_address": {
        const address = this.address ?? host
        const verdict = this.range === undefined ? "is not a valid IP address" : `is in the ${this.range}`
        return address === host.replace(/^\[(.*)\]$/, "$1")
          ? `The address ${address} ${verdict}; only public addresses are reachable.`
          : `The host ${host} resolves to ${address}, which ${verdict}; only public addresses are reachable.`
      }
      case "invalid_request":
        return `The request to ${host} is malformed: ${this.detail ?? "invalid request"}.`
      case "broker_scheme":
        return `The broker URL for ${host} uses ${this.detail ?? "a scheme this kind of broker does not take"}.`
      case "plain_broker":
        return `The broker URL for ${host} asks for a plain ${this.detail ?? "connection"} to an address outside EGRESS_ALLOW_PRIVATE; use TLS (amqps:// or tls://).`
      case "request_too_large":
        return `The request body for ${host} is ${this.detail ?? "too large"}, over the ${MAX_BODY_BYTES}-byte (1 MiB) limit.`
    }
  }
}

/** The exchange (connect, send, and read the whole response) passed its deadline. */
export class EgressTimeout extends Data.TaggedError("EgressTimeout")<{
  readonly host: string
  readonly timeoutMs: number
}> {
  override get message(): string {
    return `The exchange with ${this.host} did not complete within ${this.timeoutMs / 1000} s, including reading the response.`
  }
}

/** Where the exchange failed on the network. */
export type NetworkFailureKind = "dns" | "connect" | "tls" | "protocol"

/** The host could not be resolved or reached, TLS failed, or the connection broke. */
export class EgressNetworkError extends Data.TaggedError("EgressNetworkError")<{
  readonly host: string
  readonly kind: NetworkFailureKind
  /** A short reason with the system code, e.g. "connection refused (ECONNREFUSED)". */
  readonly reason: string
  /** The system, undici or TLS code behind it (e.g. `ECONNREFUSED`, `CERT_HAS_EXPIRED`), when there was one. */
  readonly code?: string
}> {
  override get message(): string {
    return `Could not complete the exchange with ${this.host}: ${this.reason}.`
  }
}

/** The response body passed the 1 MiB limit; reading stopped there. */
export class EgressResponseTooLarge extends Data.TaggedError("EgressResponseTooLarge")<{
  readonly host: string
  readonly limitBytes: number
}> {
  override get message(): string {
    return `The response from ${this.host} is larger than the ${this.limitBytes}-byte (1 MiB) limit, so it was not read further.`
  }
}

/** The response was compressed or otherwise encoded; only identity is accepted. */
export class EgressEncodingRefused extends Data.TaggedError("EgressEncodingRefused")<{
  readonly host: string
  /** The response's Content-Encoding, shortened to printable characters. */
  readonly contentEncoding: string
}> {
  override get message(): string {
    return `The response from ${this.host} uses Content-Encoding "${this.contentEncoding}"; only uncompressed (identity) responses are accepted.`
  }
}

/** Every way an egress exchange can fail. */
export type EgressError =
  | EgressRefused
  | EgressTimeout
  | EgressNetworkError
  | EgressResponseTooLarge
  | EgressEncodingRefused

/** Whether a value is one of the egress errors (they travel through undici callbacks). */
export const isEgressError = (u: unknown): u is EgressError =>
  u instanceof EgressRefused ||
  u instanceof EgressTimeout ||
  u instanceof EgressNetworkError ||
  u instanceof EgressResponseTooLarge ||
  u instanceof EgressEncodingRefused
