/**
 * The closed error union of a bridge operation (contract "Errors"): Conflict,
 * Transient, Auth and Permanent. Each carries the operation, the HTTP status
 * when there was one, and a one-sentence message of our own — never the
 * remote body. They are Schema.TaggedErrors so a job can store them.
 */
import { Duration, Option, Schema } from "effect"
import { Operations } from "@crm-relay/contract"

/** Retry-After is honoured up to five minutes (Limits). */
export const MAX_RETRY_AFTER: Duration.Duration = Duration.minutes(5)

const common = {
  /** The svc.crm.v1 operation that failed. */
  operation: Operations.OperationName,
  /** The HTTP status of the answer that decided the failure; null when there was no answer. */
  status: Schema.NullOr(Schema.Int),
  /** One sentence saying why; never the remote body verbatim. */
  message: Schema.String
}

/**
 * Why an exchange failed before (or instead of) a usable answer, for the
 * operator: which network, TLS, policy or size failure it was. A closed list.
 */
export const FailureReason = Schema.Literal(
  /** The host name has no DNS record (or the resolver failed). */
  "dns_not_found",
  /** Nothing listens at the host and port. */
  "connection_refused",
  /** The connection was reset, or the host or network is unreachable. */
  "connection_failed",
  /** Connecting, or the whole exchange, ran past the deadline. */
  "timeout",
  /** The certificate is not signed by an authority this server trusts. */
  "tls_untrusted",
  /** The certificate was issued for other names than the URL's host. */
  "tls_name_mismatch",
  /** The certificate has expired or is not valid yet. */
  "tls_expired",
  /** Another TLS handshake failure (e.g. the port does not speak TLS). */
  "tls_failed",
  /** The answer is not valid HTTP/1.1. */
  "invalid_http",
  /** The host resolves to an address the egress policy refuses (private, loopback, metadata, ...). */
  "address_refused",
  /** The URL itself is refused (scheme, credentials, query). */
  "url_refused",
  /** The bridge answered a redirect; redirects are never followed. */
  "redirect",
  /** The answer was larger than 1 MiB. */
  "response_too_large",
  /** The request was larger than 1 MiB. */
  "request_too_large",
  /** The answer was compressed; only identity is accepted. */
  "encoding"
)
export type FailureReason = typeof FailureReason.Type

/** Which failure it was and what the operator should do next (one sentence each, never remote text). */
export const Diagnosis = Schema.Struct({
  reason: FailureReason,
  /** The next step, e.g. "Check that the bridge is running and listening on port 8443." */
  nextStep: Schema.String
})
export type Diagnosis = typeof Diagnosis.Type

/** Optional so failures stored before it existed still decode. */
const diagnosis = { diagnosis: Schema.optionalWith(Diagnosis, { exact: true }) }

/** 409: conflict or unavailable slot; permanent for the operation and never retried. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", common) {}

/**
 * 429, 5xx, network failure or timeout: a post-call delivery may retry with
 * the same idempotency key, waiting at least `retryAfter` (at most 5 minutes).
 */
export class Transient extends Schema.TaggedError<Transient>()("Transient", {
  ...common,
  ...diagnosis,
  retryAfter: Schema.OptionFromNullOr(
    Schema.DurationFromMillis.pipe(Schema.betweenDuration(Duration.zero, MAX_RETRY_AFTER))
  )
}) {}

/** 401: the credential was refused (after the one OAuth replay, when there is one). */
export class Auth extends Schema.TaggedError<Auth>()("Auth", common) {}

/** What kind of permanent failure it was, for callers and logs that need more than the tag. */
export const PermanentKind = Schema.Literal(
  /** The bridge answered another 4xx. */
  "rejected",
  /** The bridge answered a redirect; redirects are not followed. */
  "redirect",
  /** A 2xx answer that is not a valid receipt for the operation. */
  "invalid_receipt",
  /** A 2xx answer whose body is not JSON. */
  "malformed_json",
  /** A compressed answer or a content type the transport does not accept. */
  "encoding",
  /** An MCP answer that is not a complete tool result (JSON-RPC error, server request, ...). */
  "protocol",
  /** An MCP tool error (`isError: true`) naming no error status: refused, no receipt, not retried. */
  "tool_error",
  /** Safe egress refused the exchange (address, URL, size). */
  "egress_refused",
  /** The input was refused before anything was sent (Operation rule 7). */
  "invalid_input"
)
export type PermanentKind = typeof PermanentKind.Type

/** Other 4xx, redirects, invalid receipts and every answer that cannot be believed. */
export class Permanent extends Schema.TaggedError<Permanent>()("Permanent", {
  ...common,
  ...diagnosis,
  kind: PermanentKind
}) {}

/** The closed union, as a Schema for storage. */
export const BridgeError = Schema.Union(Conflict, Transient, Auth, Permanent)
/** The closed union callers match with `Effect.catchTags`. */
export type BridgeError = Conflict | Transient | Auth | Permanent

/** Bounds a Retry-After wait to [0, 5 minutes]. */
export const boundRetryAfter = (wait: Duration.Duration): Duration.Duration =>
  Duration.min(Duration.max(wait, Duration.zero), MAX_RETRY_AFTER)

/** A Transient error; `retryAfter` is bounded to five minutes here, so callers need not. */
export const transient = (fields: {
  readonly operation: Operations.OperationName
  readonly status: number | null
  readonly message: string
  readonly retryAfter?: Duration.Duration | undefined
  readonly diagnosis?: Diagnosis | undefined
}): Transient =>
  new Transient({
    operation: fields.operation,
    status: fields.status,
    message: fields.message,
    retryAfter: Option.map(Option.fromNullable(fields.retryAfter), boundRetryAfter),
    ...(fields.diagnosis === undefined ? {} : { diagnosis: fields.diagnosis })
  })
