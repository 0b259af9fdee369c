/**
 * Turns an egress failure into what the operator reads: which failure it was
 * (a closed reason), one sentence naming it and the next step. Built from our
 * own words and the failure's code only, never from anything the remote sent.
 */
import type { Diagnosis } from "../BridgeError.js"
import type { EgressError, EgressNetworkError, EgressRefused } from "./egress/EgressError.js"

/** The failure, read: whether a retry may help, the sentence, and the typed reason with its next step. */
export interface Diagnosed {
  readonly retryable: boolean
  readonly message: string
  readonly diagnosis: Diagnosis
}

/** Who was called and where: `peer` ("the bridge") at `where` ("bridge.example.com:443"). */
export interface Target {
  readonly peer: string
  readonly where: string
  /** The port, as the operator sees it in the URL. */
  readonly port: string
}

/** The `host:port` and port of `url` (443 when the URL names none). */
export const targetOf = (peer: string, url: string): Target => {
  const parsed = URL.parse(url)
  if (parsed === null) return { peer, where: "an invalid URL", port: "443" }
  const port = parsed.port === "" ? "443" : parsed.port
  return { peer, where: `${parsed.hostname}:${port}`, port }
}

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

const read = (
  retryable: boolean,
  reason: Diagnosis["reason"],
  what: string,
  nextStep: string
): Diagnosed => ({ retryable, message: `${what} ${nextStep}`, diagnosis: { reason, nextStep } })

const code = (error: EgressNetworkError): string => (error.code === undefined ? "" : ` (${error.code})`)

const TRUST_STEP = "Give the bridge a certificate from a public certificate authority " +
  "(for a local test bridge, start this server with NODE_EXTRA_CA_CERTS naming the bridge's CA file)."

const network = (error: EgressNetworkError, target: Target): Diagnosed => {
  const { peer, where } = target
  const host = error.host
  switch (error.kind) {
    case "dns":
      return error.code === "ETIMEOUT"
        ? read(true, "timeout", `Resolving the host name ${host} of ${peer} timed out.`, "Check the DNS of this server, then try again.")
        : read(
          true,
          "dns_not_found",
          `The host name ${host} of ${peer} was not found in DNS${code(error)}.`,
          "Check the URL's host name for a typo and that its DNS record exists."
        )
    case "tls":
      switch (error.code) {
        case "ERR_TLS_CERT_ALTNAME_INVALID":
          return read(
            true,
            "tls_name_mismatch",
            `The TLS certificate of ${peer} at ${where} is not issued for the name ${host}${code(error)}.`,
            "Use the host name the certificate names in the URL, or reissue the bridge's certificate for this name."
          )
        case "CERT_HAS_EXPIRED":
        case "CERT_NOT_YET_VALID":
          return read(
            true,
            "tls_expired",
            `The TLS certificate of ${peer} at ${where} has expired or is not yet valid${code(error)}.`,
            "Renew the bridge's certificate (and check the clocks of both machines)."
          )
        default:
          return error.reason.startsWith("the TLS certificate is not signed")
            ? read(true, "tls_untrusted", `The TLS certificate of ${peer} at ${where} is not signed by a trusted authority${code(error)}.`, TRUST_STEP)
            : read(
              true,
              "tls_failed",
              `The TLS handshake with ${peer} at ${where} failed${code(error)}.`,
              "Check that the URL names the bridge's HTTPS port and that the bridge offers a current TLS version."
            )
      }
    case "connect":
      return error.code === "ECONNREFUSED"
        ? read(
          true,
          "connection_refused",
          `${capitalize(peer)} at ${where} refused the connection (ECONNREFUSED): nothing listens on port ${target.port}.`,
          "Check that the bridge is running and that the URL names its port."
        )
        : error.code === "ETIMEDOUT" || error.code === "UND_ERR_CONNECT_TIMEOUT"
        ? read(
          true,
          "timeout",
          `Connecting to ${peer} at ${where} timed out${code(error)}.`,
          "Check that the bridge is running and that no firewall drops the connection, then try again."
        )
        : read(
          true,
          "connection_failed",
          `The connection to ${peer} at ${where} failed: ${error.reason}.`,
          "Check the network path to the bridge, then try again."
        )
    case "protocol":
      return read(
        true,
        "invalid_http",
        `${capitalize(peer)} at ${where} did not answer valid HTTP${code(error)}.`,
        "Check that the URL names the bridge's HTTPS endpoint."
      )
  }
}

const refused = (error: EgressRefused, target: Target): Diagnosed => {
  switch (error.reason) {
    case "private_address":
      return read(
        false,
        "address_refused",
        `Safe egress refused to reach ${target.peer}: ${error.message}`,
        "Use a URL whose host resolves only to public addresses (a local test bridge needs EGRESS_ALLOW_PRIVATE on this server, never in production)."
      )
    case "request_too_large":
      return read(
        false,
        "request_too_large",
        `The request to ${target.peer} exceeds the 1 MiB body limit.`,
        "Send less data in one operation."
      )
    default:
      return read(false, "url_refused", `Safe egress refused the URL of ${target.peer}: ${error.message}`, "Correct the URL.")
  }
}

/** What `error`, met while calling `target`, means for the operator. */
export const diagnose = (error: EgressError, target: Target): Diagnosed => {
  switch (error._tag) {
    case "EgressNetworkError":
      return network(error, target)
    case "EgressRefused":
      return refused(error, target)
    case "EgressTimeout":
      return read(
        true,
        "timeout",
        `The exchange with ${target.peer} at ${target.where} ran past its ${error.timeoutMs / 1000} s deadline.`,
        "Check that the bridge answers within the deadline; the exchange may be retried later."
      )
    case "EgressResponseTooLarge":
      return read(
        false,
        "response_too_large",
        `The answer of ${target.peer} at ${target.where} exceeded the 1 MiB limit and was not read further.`,
        "Check that the bridge answers with the contract's payloads only."
      )
    case "EgressEncodingRefused":
      return read(
        false,
        "encoding",
        `${capitalize(target.peer)} sent a compressed answer, but only uncompressed answers are accepted.`,
        "Turn off response compression at the bridge (crm-relay sends Accept-Encoding: identity)."
      )
  }
}

/** The diagnosis of a redirect answer. */
export const redirectDiagnosis = (status: number, peer: string): Diagnosed =>
  read(
    false,
    "redirect",
    `${capitalize(peer)} answered a ${status} redirect, which is not followed.`,
    "Put the final URL of the bridge in the connection."
  )
