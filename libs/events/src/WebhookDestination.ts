/**
 * The HTTPS webhook as a destination kind: POSTs the signed event to the
 * target URL through the one safe egress (`allowQuery: true`: receiver URLs
 * may carry a query) and judges the answer.
 *
 * - 2xx: delivered, whatever the body (its size, its Content-Encoding): only
 *   the status and headers are read, the body is drained unread by egress.
 * - 3xx (never followed), 4xx, 5xx, timeout, network: Transient (at least
 *   60 s after a timeout or 429, Retry-After honoured up to 10 hours by the
 *   schedule).
 * - Egress refused the target (private, loopback or metadata address, not
 *   https, credentials in the URL, body over 1 MiB): Permanent, nothing sent.
 * - 410 Gone: Ended `gone` (the worker removes the subscription).
 * - Any other non-2xx answer carrying `webhook-delivery: abort-message`:
 *   Ended `aborted`, no retry.
 */
import { Egress, type EgressError, type EgressResponse } from "@crm-relay/bridge"
import { Duration, Effect, Either, Layer, Option, Schema } from "effect"
import { Destination, DestinationRefused, make, Outcome } from "./Destination.js"
import { DestinationKinds } from "./DestinationKinds.js"
import * as DeliverySchedule from "./DeliverySchedule.js"
import * as SubscriptionLifecycle from "./SubscriptionLifecycle.js"

/** The kind's name. */
export const KIND = "webhook"

/**
 * A webhook's stored configuration. Only its shape is decoded here: the URL is judged by egress
 * at every send, so a stored URL that breaks a rule is a refused attempt with egress's reason.
 */
export const Config = Schema.Struct({ url: Schema.String })
export type Config = typeof Config.Type

/** The `webhook-delivery` header value that ends a message's retries (Svix's convention), any case. */
export const ABORT_MESSAGE = "abort-message"

const isAbortMessage = (value: string | undefined): boolean =>
  value !== undefined && value.split(",").some((token) => token.trim().toLowerCase() === ABORT_MESSAGE)

/**
 * Judges the answer (or the egress failure) of one POST that ended at `nowMillis`; a failure
 * without an answer took `failedAfterMs` (an answer carries egress's own measure).
 */
export const classify = (
  sent: Either.Either<EgressResponse, EgressError>,
  nowMillis: number,
  failedAfterMs?: number
): Outcome => {
  if (Either.isLeft(sent)) {
    const transient = (errorClass: string, error: string, retryAfter: Duration.Duration) =>
      Outcome.Transient({ errorClass, error, statusCode: null, retryAfter, durationMs: failedAfterMs })
    const error = sent.left
    switch (error._tag) {
      case "EgressRefused":
        return Outcome.Permanent({
          errorClass: "refused",
          error: `Not sent: ${error.message}`,
          statusCode: null,
          durationMs: failedAfterMs
        })
      case "EgressTimeout":
        return transient("timeout", error.message, DeliverySchedule.MIN_WAIT_AFTER_TIMEOUT_OR_429)
      case "EgressNetworkError":
        return transient("network", error.message, Duration.zero)
      // Not raised when the body is discarded (as deliveries ask); written without the remote header either way.
      case "EgressResponseTooLarge":
        return transient("response_too_large", "The receiver's answer was larger than 1 MiB.", Duration.zero)
      case "EgressEncodingRefused":
        return transient("encoding", "The receiver's answer was encoded.", Duration.zero)
    }
  }
  const { durationMs, headers, status } = sent.right
  if (status >= 200 && status <= 299) return Outcome.Delivered({ statusCode: status, durationMs })
  if (status === 410) {
    return Outcome.Ended({
      reason: "gone",
      errorClass: "gone",
      error: SubscriptionLifecycle.endedBecause.gone,
      statusCode: status,
      durationMs
    })
  }
  if (isAbortMessage(headers["webhook-delivery"])) {
    return Outcome.Ended({
      reason: "aborted",
      errorClass: "aborted",
      error: `The receiver answered ${status} with webhook-delivery: abort-message; this message is not retried.`,
      statusCode: status,
      durationMs
    })
  }
  const wait = Option.getOrElse(DeliverySchedule.parseRetryAfter(headers["retry-after"], nowMillis), () => Duration.zero)
  const failed = (errorClass: string, error: string, retryAfter = wait) =>
    Outcome.Transient({ errorClass, error, statusCode: status, retryAfter, asked: wait, durationMs })
  if (status === 429) {
    return failed(
      "rate_limited",
      "The receiver answered 429 (too many requests).",
      Duration.max(wait, DeliverySchedule.MIN_WAIT_AFTER_TIMEOUT_OR_429)
    )
  }
  if (status >= 300 && status <= 399) return failed("redirect", `The receiver answered ${status}, a redirect; redirects are not followed.`)
  if (status >= 400 && status <= 499) return failed("client_error", `The receiver answered ${status}.`)
  if (status >= 500 && status <= 599) return failed("server_error", `The receiver answered ${status}.`)
  return failed("unexpected_status", `The receiver answered ${status}, which is not a success.`)
}

/** How every delivery is sent: receiver URLs may carry a query; only the answer's status and headers are read. */
const SEND_OPTIONS = { allowQuery: true, purpose: "webhook", responseBody: "discard" } as const

/**
 * The rules a webhook URL must meet before anything is stored (egress applies them, and the
 * address rules, again at every send): https, no credentials, no fragment.
 */
export const checkUrl = (url: string): Effect.Effect<void, DestinationRefused> => {
  const parsed = URL.parse(url)
  const refuse = (message: string) => Effect.fail(new DestinationRefused({ reason: "invalid_config", message }))
  if (parsed === null) return refuse("The webhook URL is not a URL.")
  if (parsed.protocol !== "https:") return refuse("The webhook URL must start with https://.")
  if (parsed.username !== "" || parsed.password !== "") return refuse("The webhook URL must not carry credentials.")
  if (parsed.hash !== "") return refuse("The webhook URL must not carry a fragment.")
  return Effect.void
}

/** The webhook kind over the context's `Egress` (and Clock: Retry-After dates are read against it). */
export const makeService = Effect.map(Effect.zip(Egress, Effect.clock), ([egress, clock]) =>
  make<Config>({
    kind: KIND,
    config: Config,
    publish: (message, config) =>
      Effect.suspend(() => {
        const startedAt = clock.unsafeCurrentTimeMillis()
        return Effect.map(
          Effect.either(egress.send({
            method: "POST",
            url: config.url,
            headers: message.headers,
            body: message.body,
            options: SEND_OPTIONS
          })),
          (sent) => {
            const endedAt = clock.unsafeCurrentTimeMillis()
            return classify(sent, endedAt, endedAt - startedAt)
          }
        )
      }),
    check: (_target, config) => checkUrl(config.url)
  }))

/** The webhook kind as a `Destination` Layer. */
export const layer: Layer.Layer<Destination, never, Egress> = Layer.effect(Destination, makeService)

/** The webhook kind, registered into the app's `DestinationKinds`. */
export const registered: Layer.Layer<never, never, Egress | DestinationKinds> = DestinationKinds.register(layer)
