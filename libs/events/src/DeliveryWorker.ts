/**
 * The webhook delivery worker: claims due deliveries (JobQueue over the
 * `deliveries` table) and POSTs each stored event to its subscription's
 * target URL through the one safe egress (`allowQuery: true`: receiver URLs
 * may carry a query), signed per Standard Webhooks with the account's secret.
 *
 * - 2xx: delivered, whatever the body (its size, its Content-Encoding): only
 *   the status and headers are read, the body is drained unread by egress.
 *   Anything else is a failure: 3xx (never followed), 4xx, 5xx, timeout,
 *   network. Failures are retried on `deliveryRetry` (at least
 *   60 s after a timeout or 429, Retry-After honoured up to 10 hours) and the
 *   delivery fails for good (dead letter, replayable) when it ends.
 * - Egress refused the target (private, loopback or metadata address, not
 *   https, credentials in the URL, body over 1 MiB): nothing was sent; the
 *   delivery fails at once with the reason.
 * - The subscription was removed after the fan-out: nothing is sent; the
 *   delivery fails with that reason.
 * - Every attempt is a `delivery_attempts` row (stored with the outcome, in
 *   one statement) and one structured log line; neither holds the target's
 *   path or query, the payload, the secret, or text of the receiver's
 *   headers.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Egress, type EgressError, type EgressResponse } from "@crm-relay/bridge"
import { JobQueue, type Notifier } from "@crm-relay/store"
import { Clock, Duration, Effect, Either, Option, type Redacted } from "effect"
import { type AttemptRecord, type AttemptResult, attemptRow, type DeliveryJob, table } from "./Deliveries.js"
import * as DeliverySchedule from "./DeliverySchedule.js"
import { SigningSecrets } from "./SigningSecrets.js"
import * as WebhookSigner from "./WebhookSigner.js"

/** Why an attempt failed, as stored in `delivery_attempts.error_class`. */
export type ErrorClass =
  | "redirect"
  | "client_error"
  | "rate_limited"
  | "server_error"
  | "unexpected_status"
  | "timeout"
  | "network"
  | "refused"
  | "response_too_large"
  | "encoding"
  | "subscription_removed"
  | "no_signing_secret"

/** How one attempt ended. */
export type Classified =
  | { readonly _tag: "Delivered"; readonly statusCode: number }
  | {
    readonly _tag: "Failed"
    readonly statusCode: number | null
    readonly errorClass: ErrorClass
    /** One short sentence (no path, query, payload or secret). */
    readonly error: string
    readonly failure: DeliverySchedule.DeliveryFailure
  }

const failed = (
  errorClass: ErrorClass,
  error: string,
  failure: DeliverySchedule.DeliveryFailure,
  statusCode: number | null = null
): Classified => ({ _tag: "Failed", statusCode, errorClass, error, failure })

const NEVER_RETRY: DeliverySchedule.DeliveryFailure = { retryable: false, wait: Duration.zero }

/** Classifies the answer (or the egress failure) of one attempt that ended at `nowMillis`. */
export const classify = (sent: Either.Either<EgressResponse, EgressError>, nowMillis: number): Classified => {
  if (Either.isLeft(sent)) {
    const error = sent.left
    switch (error._tag) {
      case "EgressRefused":
        return failed("refused", `Not sent: ${error.message}`, NEVER_RETRY)
      case "EgressTimeout":
        return failed("timeout", error.message, { retryable: true, wait: DeliverySchedule.MIN_WAIT_AFTER_TIMEOUT_OR_429 })
      case "EgressNetworkError":
        return failed("network", error.message, { retryable: true, wait: Duration.zero })
      // Not raised when the body is discarded (as deliveries ask); written without the remote header either way.
      case "EgressResponseTooLarge":
        return failed("response_too_large", "The receiver's answer was larger than 1 MiB.", { retryable: true, wait: Duration.zero })
      case "EgressEncodingRefused":
        return failed("encoding", "The receiver's answer was encoded.", { retryable: true, wait: Duration.zero })
    }
  }
  const { status, headers } = sent.right
  if (status >= 200 && status <= 299) return { _tag: "Delivered", statusCode: status }
  const retryAfter = DeliverySchedule.parseRetryAfter(headers["retry-after"], nowMillis)
  const wait = Option.getOrElse(retryAfter, () => Duration.zero)
  if (status === 429) {
    return failed("rate_limited", "The receiver answered 429 (too many requests).", {
      retryable: true,
      wait: Duration.max(wait, DeliverySchedule.MIN_WAIT_AFTER_TIMEOUT_OR_429)
    }, status)
  }
  const retry = { retryable: true, wait }
  if (status >= 300 && status <= 399) {
    return failed("redirect", `The receiver answered ${status}, a redirect; redirects are not followed.`, retry, status)
  }
  if (status >= 400 && status <= 499) return failed("client_error", `The receiver answered ${status}.`, retry, status)
  if (status >= 500 && status <= 599) return failed("server_error", `The receiver answered ${status}.`, retry, status)
  return failed("unexpected_status", `The receiver answered ${status}, which is not a success.`, retry, status)
}

/** The host of a target URL, for logs ("" when it does not parse). */
const hostOf = (url: string): string => URL.parse(url)?.host ?? ""

/** Runner settings of the delivery worker. */
export interface DeliveryWorkerOptions extends JobQueue.RunOptions {}

/**
 * Defaults: 128 deliveries at once (a quarter of them, 32, to one receiver origin: slots are cheap
 * fibers waiting on I/O, and the share bounds what one target takes), claimed 32 at a time, 30 s leases.
 */
export const DEFAULT_OPTIONS: DeliveryWorkerOptions = { concurrency: 128, batchSize: 32, lease: Duration.seconds(30) }

/** Makes the handler of one claimed delivery. */
export const makeHandler = Effect.gen(function*() {
  const egress = yield* Egress
  const secrets = yield* SigningSecrets
  // Keyed by the secret itself (SigningSecrets hands out the same value each time), so a key is imported once.
  const keys = new WeakMap<Redacted.Redacted<string>, Either.Either<WebhookSigner.SigningKey, WebhookSigner.InvalidSigningSecret>>()
  const keyOf = (secret: Redacted.Redacted<string>) => {
    const known = keys.get(secret)
    if (known !== undefined) return known
    const key = WebhookSigner.signingKey(secret)
    keys.set(secret, key)
    return key
  }

  const attemptOnce = (job: JobQueue.Job<DeliveryJob>, startedAt: number) =>
    Effect.gen(function*() {
      if (job.data.subscription_removed === true) {
        return { classified: failed("subscription_removed", "The subscription was removed; nothing was sent.", NEVER_RETRY), durationMs: 0 }
      }
      const set = yield* secrets.signing(job.data.account_id).pipe(Effect.either)
      const key = Either.flatMap(set, (s) => keyOf(s.current))
      if (Either.isLeft(key)) {
        return {
          classified: failed("no_signing_secret", "The account has no usable signing secret; nothing was sent.", NEVER_RETRY),
          durationMs: 0
        }
      }
      const sent = yield* egress.send({
        method: "POST",
        url: job.data.target_url,
        headers: WebhookSigner.headers({
          key: key.right,
          // A previous secret that no longer imports is left out: the current signature still goes.
          previous: Either.isRight(set) && Option.isSome(set.right.previous)
            ? Either.getOrUndefined(keyOf(set.right.previous.value))
            : undefined,
          id: job.id,
          timestamp: Math.floor(startedAt / 1000),
          body: job.data.body
        }),
        body: job.data.body,
        options: { allowQuery: true, purpose: "webhook", responseBody: "discard" }
      }).pipe(Effect.either)
      const endedAt = yield* Clock.currentTimeMillis
      return {
        classified: classify(sent, endedAt),
        durationMs: Either.isRight(sent) ? sent.right.durationMs : endedAt - startedAt
      }
    })

  return Effect.fn("DeliveryWorker.deliver")(function*(job: JobQueue.Job<DeliveryJob>) {
    const startedAt = yield* Clock.currentTimeMillis
    const { classified, durationMs } = yield* attemptOnce(job, startedAt)
    const delay = classified._tag === "Failed" && classified.failure.retryable
      ? yield* DeliverySchedule.delayAfter(job.attempt, classified.failure)
      : Option.none<Duration.Duration>()
    const result: AttemptResult = classified._tag === "Delivered" ? "delivered" : Option.isSome(delay) ? "retry" : "failed"
    const record: AttemptRecord = {
      delivery_id: job.id,
      attempt: job.attempt,
      started_at: new Date(startedAt),
      status_code: classified.statusCode,
      duration_ms: Math.max(0, Math.round(durationMs)),
      error_class: classified._tag === "Failed" ? classified.errorClass : null,
      error: classified._tag === "Failed" ? classified.error : null,
      result
    }
    // Logged in the statement that stores the outcome (with other deliveries' outcomes), even if the lease was lost.
    const logRow = attemptRow(record)

    const log = result === "failed" ? Effect.logWarning : Effect.logInfo
    yield* log("Webhook delivery attempt").pipe(
      Effect.annotateLogs({
        delivery_id: job.id,
        account_id: job.data.account_id,
        attempt: job.attempt,
        target_host: hostOf(job.data.target_url),
        status_code: record.status_code,
        duration_ms: record.duration_ms,
        error_class: record.error_class,
        result,
        ...(Option.isSome(delay) ? { retry_in_ms: Duration.toMillis(delay.value) } : {})
      })
    )

    if (classified._tag === "Delivered") return JobQueue.JobResult.Complete({ set: { delivered_at: record.started_at }, log: logRow })
    if (Option.isSome(delay)) return JobQueue.JobResult.Retry({ delay: delay.value, error: classified.error, log: logRow })
    const error = classified.failure.retryable
      ? `Gave up after ${job.attempt} attempt${job.attempt === 1 ? "" : "s"}: ${classified.error}`
      : classified.error
    return JobQueue.JobResult.DeadLetter({ error, log: logRow })
  })
})

/**
 * Delivers due webhooks until interrupted (interruption is the clean
 * shutdown: running attempts get the grace period, the rest are released).
 */
export const run = (
  options: DeliveryWorkerOptions = {}
): Effect.Effect<never, never, Egress | SigningSecrets | SqlClient.SqlClient | Notifier.Notifier> =>
  Effect.flatMap(makeHandler, (deliver) => JobQueue.run(table, deliver, { ...DEFAULT_OPTIONS, ...options }))
