/**
 * Maps what undici and Node report (system codes, undici codes, TLS
 * verification codes) to an egress error with a short, readable reason.
 */
import {
  EgressNetworkError,
  EgressRefused,
  EgressResponseTooLarge,
  EgressTimeout,
  isEgressError,
  MAX_BODY_BYTES,
  type EgressError
} from "./EgressError.js"

const UNTRUSTED_CERTIFICATE = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED"
])

const CONNECT_REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "the connection was refused",
  ECONNRESET: "the connection was reset",
  EHOSTUNREACH: "the host is unreachable",
  ENETUNREACH: "the network is unreachable",
  ETIMEDOUT: "the connection timed out",
  EPIPE: "the connection was closed while sending",
  EADDRNOTAVAIL: "the address is not available",
  UND_ERR_CONNECT_TIMEOUT: "the connection timed out",
  UND_ERR_SOCKET: "the connection closed unexpectedly"
}

const codeOf = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return "UNKNOWN"
  if ("code" in error && typeof error.code === "string") return error.code
  // A failed multi-address connect (autoSelectFamily) reports an AggregateError.
  if ("errors" in error && Array.isArray(error.errors) && error.errors.length > 0) return codeOf(error.errors[0])
  return "UNKNOWN"
}

/** The egress error for a failure raised while exchanging with `host`. */
export const classifyFailure = (host: string, timeoutMs: number, error: unknown): EgressError => {
  if (isEgressError(error)) return error
  const code = codeOf(error)
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") return new EgressTimeout({ host, timeoutMs })
  if (code === "UND_ERR_RES_EXCEEDED_MAX_SIZE") return new EgressResponseTooLarge({ host, limitBytes: MAX_BODY_BYTES })
  if (code === "UND_ERR_INVALID_ARG") {
    return new EgressRefused({ reason: "invalid_request", host, detail: "undici rejected the request arguments" })
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return new EgressNetworkError({ host, kind: "tls", code, reason: `the TLS certificate is not valid for ${host} (${code})` })
  }
  if (UNTRUSTED_CERTIFICATE.has(code)) {
    return new EgressNetworkError({ host, kind: "tls", code, reason: `the TLS certificate is not signed by a trusted authority (${code})` })
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    return new EgressNetworkError({ host, kind: "tls", code, reason: `the TLS certificate is outside its validity period (${code})` })
  }
  if (code.startsWith("ERR_SSL") || code.startsWith("ERR_TLS") || code === "EPROTO") {
    return new EgressNetworkError({ host, kind: "tls", code, reason: `the TLS handshake failed (${code})` })
  }
  if (code.startsWith("HPE_")) {
    return new EgressNetworkError({ host, kind: "protocol", code, reason: `the response is not valid HTTP/1.1 (${code})` })
  }
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ENODATA") {
    return new EgressNetworkError({ host, kind: "dns", code, reason: `the host name could not be resolved (${code})` })
  }
  const connectReason = CONNECT_REASONS[code]
  if (connectReason !== undefined) {
    return new EgressNetworkError({ host, kind: "connect", code, reason: `${connectReason} (${code})` })
  }
  return new EgressNetworkError({ host, kind: "protocol", code, reason: `the exchange failed (${code})` })
}
