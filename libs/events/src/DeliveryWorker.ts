/**
 * The delivery worker: claims due deliveries (JobQueue over the
 * `deliveries` table), signs each stored event per Standard Webhooks with
 * the account's secret and publishes it through its destination kind
 * (`Destination`, looked up in `DestinationKinds`; today every delivery is a
 * webhook: `WebhookDestination` says what each answer means).
 *
 * - Delivered: done. Transient: retried on `deliveryRetry` (never sooner
 *   than the wait the outcome asks for) and the delivery fails for good
 *   (dead letter, replayable) when the schedule ends. Permanent: fails at
 *   once with the reason, nothing retried.
 * - Ended `gone` (a webhook's 410): the subscription is removed at once and
 *   the delivery, with its subscription's other pending ones, ends as `gone`
 *   (SubscriptionLifecycle). Ended `aborted`: this message ends, no retry.
 * - Failures count toward the subscription's failure clock; the failure that
 *   disables it ends its delivery as `disabled`; a success resets the clock.
 * - The subscription was removed after the fan-out: nothing is sent; the
 *   delivery fails with that reason (ends as `gone` when a 410 removed it);
 *   a disabled subscription's delivery ends as `disabled`, unsent.
 * - A destination removed anywhere (any replica, the CLI): what the kinds
 *   hold for it here (a broker connection) is let go at once, on the
 *   removal's announcement or, if that was lost, at the next recheck
 *   (DestinationRemovals).
 * - Every attempt is stored with the outcome, in one statement (the one
 *   that finishes the delivery on its row, the others as `delivery_attempts`
 *   rows: see Deliveries), and is one structured log line; neither holds the
 *   target's path or query, the payload, the secret, or text of the
 *   receiver's headers.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Egress, EgressError, EgressResponse } from "@crm-relay/bridge"
import { JobQueue, Notifier } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import type { Vault } from "@crm-relay/store/Vault"
import { Duration, Effect, Either, FiberRef, Layer, LogLevel, Metric, Option, type Redacted } from "effect"
import { type AttemptRecord, type AttemptResult, attemptRow, bodyOf, type DeliveryJob, table } from "./Deliveries.js"
import { type DestinationRefused, type DestinationService, type Outcome, type Target, waitOf } from "./Destination.js"
import { DestinationKinds } from "./DestinationKinds.js"
import * as DestinationRemovals from "./DestinationRemovals.js"
import { Destinations } from "./Destinations.js"
import * as DeliverySchedule from "./DeliverySchedule.js"
import * as OriginHealth from "./OriginHealth.js"
import * as OriginMetrics from "./OriginMetrics.js"
import * as SubscriptionLifecycle from "./SubscriptionLifecycle.js"
import { SigningSecrets } from "./SigningSecrets.js"
import * as WebhookDestination from "./WebhookDestination.js"
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
  | "gone"
  | "aborted"
  | "subscription_gone"
  | "subscription_disabled"

/** How one attempt ended, as the worker decides on it. */
export type Classified =
  | { readonly _tag: "Delivered"; readonly statusCode: number | null }
  | {
    /** No retry, and not a failure: the receiver (or the subscription's state) ended the message. */
    readonly _tag: "Ended"
    readonly statusCode: number | null
    readonly reason: SubscriptionLifecycle.EndReason
    readonly errorClass: ErrorClass | (string & {})
    readonly error: string
  }
  | {
    readonly _tag: "Failed"
    readonly statusCode: number | null
    /** The worker's own classes, or a destination kind's. */
    readonly errorClass: ErrorClass | (string & {})
    /** One short sentence (no path, query, payload or secret). */
    readonly error: string
    readonly failure: DeliverySchedule.DeliveryFailure
  }

const failed = (
  errorClass: ErrorClass | (string & {}),
  error: string,
  failure: DeliverySchedule.DeliveryFailure,
  statusCode: number | null = null
): Classified => ({ _tag: "Failed", statusCode, errorClass, error, failure })

const endedBy = (reason: SubscriptionLifecycle.EndReason, errorClass: ErrorClass, error: string): Classified => ({
  _tag: "Ended",
  statusCode: null,
  reason,
  errorClass,
  error
})

const NEVER_RETRY: DeliverySchedule.DeliveryFailure = { retryable: false, wait: Duration.zero }

/** The `webhook-delivery` header value that ends a message's retries (Svix's convention), any case. */
export const ABORT_MESSAGE = WebhookDestination.ABORT_MESSAGE

/** What a destination's outcome means to the worker. */
export const fromOutcome = (outcome: Outcome): Classified => {
  switch (outcome._tag) {
    case "Delivered":
      return { _tag: "Delivered", statusCode: outcome.statusCode }
    case "Ended":
      return { _tag: "Ended", statusCode: outcome.statusCode, reason: outcome.reason, errorClass: outcome.errorClass, error: outcome.error }
    case "Transient":
      return failed(outcome.errorClass, outcome.error, { retryable: true, wait: waitOf(outcome) }, outcome.statusCode)
    case "Permanent":
      return failed(outcome.errorClass, outcome.error, NEVER_RETRY, outcome.statusCode)
  }
}

/** Classifies a webhook's answer (or the egress failure) of one attempt that ended at `nowMillis`. */
export const classify = (sent: Either.Either<EgressResponse, EgressError>, nowMillis: number): Classified =>
  fromOutcome(WebhookDestination.classify(sent, nowMillis))

/** The host of a target URL, for logs ("" when it does not parse). */
const hostOf = (url: string): string => URL.parse(url)?.host ?? ""

/** Runner settings of the delivery worker. */
export interface DeliveryWorkerOptions extends JobQueue.RunOptions {
  /** When a failing subscription is disabled. Default `SubscriptionLifecycle.DEFAULT_POLICY`. */
  readonly autoDisable?: SubscriptionLifecycle.AutoDisablePolicy | undefined
  /** When a failing receiver origin is held, and how often it is probed. Default `OriginHealth.DEFAULT_PROBE_POLICY`. */
  readonly probes?: OriginHealth.ProbePolicy | undefined
  /** How often the worker asks which of its destinations were removed unheard. Default `DestinationRemovals.DEFAULT_RECHECK`. */
  readonly removalRecheck?: Duration.DurationInput | undefined
}

/**
 * Defaults: 128 deliveries at once (a quarter of them, 32, to one receiver origin: slots are cheap
 * fibers waiting on I/O, and the share bounds what one target takes), claimed 32 at a time, 30 s leases.
 */
export const DEFAULT_OPTIONS: DeliveryWorkerOptions = { concurrency: 128, batchSize: 32, lease: Duration.seconds(30) }

/** The first of `items` in their order (a Map's or Set's oldest entry). */
const firstOf = <A>(items: Iterable<A>): A | undefined => {
  for (const item of items) return item
  return undefined
}

/**
 * Makes the handler of one claimed delivery, for the scope: while it lasts, what the kinds hold for
 * a destination removed anywhere (a broker connection) is let go at once (DestinationRemovals).
 */
export const makeHandler = (
  policy: SubscriptionLifecycle.AutoDisablePolicy = SubscriptionLifecycle.DEFAULT_POLICY,
  probes: OriginHealth.ProbePolicy = OriginHealth.DEFAULT_PROBE_POLICY,
  recheck: Duration.DurationInput = DestinationRemovals.DEFAULT_RECHECK
) => Effect.gen(function*() {
  const kinds = yield* DestinationKinds
  const destinations = yield* Destinations
  // A REST hook (no destination) is a webhook to its target URL.
  const webhook: DestinationService = yield* Effect.orDie(kinds.get(WebhookDestination.KIND))
  const restHook = (job: JobQueue.Job<DeliveryJob>): Target => ({ config: { url: job.data.target_url }, credentials: Option.none() })
  // A destination never changes (it is removed and created anew), so its kind and unsealed target are
  // kept, the least recently used first to go. This is also how the worker finds what its kinds hold for
  // a destination (a broker connection, keyed by the target): an entry dropped lets go of it too.
  type Loaded = { readonly destination: DestinationService; readonly target: Target }
  const loaded = new Map<string, Loaded>()
  const MAX_KEPT = 10_000
  // Destinations removed lately: a publish under way when the removal was heard leaves no connection it reopened.
  const removed = new Set<string>()
  const MAX_REMOVED = 1_000
  const letGo = (id: string) =>
    Effect.suspend(() => {
      const known = loaded.get(id)
      loaded.delete(id)
      return known === undefined ? Effect.void : known.destination.release(known.target)
    })
  const noteRemoved = (id: string) =>
    Effect.suspend(() => {
      removed.delete(id)
      removed.add(id)
      const oldest = firstOf(removed)
      if (removed.size > MAX_REMOVED && oldest !== undefined) removed.delete(oldest)
      return letGo(id)
    })
  yield* DestinationRemovals.watch(() => [...loaded.keys()], noteRemoved, recheck)
  const destinationOf = (job: JobQueue.Job<DeliveryJob>): Effect.Effect<Loaded, DestinationRefused> => {
    const id = job.data.destination_id
    if (id === null) return Effect.succeed({ destination: webhook, target: restHook(job) })
    const known = loaded.get(id)
    if (known !== undefined) {
      loaded.delete(id)
      loaded.set(id, known)
      return Effect.succeed(known)
    }
    return Effect.tap(destinations.load(id), (found) => {
      if (removed.has(id)) return Effect.void
      loaded.set(id, found)
      const oldest = firstOf(loaded.keys())
      return loaded.size > MAX_KEPT && oldest !== undefined ? letGo(oldest) : Effect.void
    })
  }
  // After a publish to a destination removed meanwhile: what the publish may have opened again goes too.
  const afterPublish = (job: JobQueue.Job<DeliveryJob>, { destination, target }: Loaded) =>
    job.data.destination_id !== null && removed.has(job.data.destination_id) ? destination.release(target) : Effect.void
  const secrets = yield* SigningSecrets
  const sql = yield* SqlClient.SqlClient
  const clock = yield* Effect.clock
  // Keyed by the secret itself (SigningSecrets hands out the same value each time), so a key is imported once.
  const keys = new WeakMap<Redacted.Redacted<string>, Either.Either<WebhookSigner.SigningKey, WebhookSigner.InvalidSigningSecret>>()
  const keyOf = (secret: Redacted.Redacted<string>) => {
    const known = keys.get(secret)
    if (known !== undefined) return known
    const key = WebhookSigner.signingKey(secret)
    keys.set(secret, key)
    return key
  }

  // Plain Effect chains rather than generators: this runs once per delivery, and under a backlog the
  // runtime's steps are a good part of a delivery's CPU.
  // `outcome`: what the destination answered (none when nothing was sent), for the origin's health.
  type Attempted = { readonly classified: Classified; readonly durationMs: number; readonly outcome?: Outcome | undefined }
  const unsent = (classified: Classified): Effect.Effect<Attempted> => Effect.succeed({ classified, durationMs: 0 })

  const attemptOnce = (job: JobQueue.Job<DeliveryJob>, startedAt: number): Effect.Effect<Attempted> => {
    if (job.data.subscription_state === "gone") {
      return unsent(endedBy("gone", "subscription_gone", "The subscription was removed after its receiver answered 410 Gone; nothing was sent."))
    }
    if (job.data.subscription_state === "disabled") {
      return unsent(endedBy("disabled", "subscription_disabled", SubscriptionLifecycle.endedBecause.disabled))
    }
    if (job.data.subscription_removed === true) {
      return unsent(failed("subscription_removed", "The subscription was removed; nothing was sent.", NEVER_RETRY))
    }
    const rendered = bodyOf(job.id, job.data)
    if (Either.isLeft(rendered)) {
      return unsent(failed("encoding", "The call outcome this event is built from does not decode; nothing was sent.", NEVER_RETRY))
    }
    const body = rendered.right
    if (body === null) {
      return unsent(failed("encoding", "The delivery's payload is no longer stored (retention dropped it); nothing was sent.", NEVER_RETRY))
    }
    return Effect.flatMap(Effect.either(secrets.signing(job.data.account_id)), (set) => {
      const key = Either.flatMap(set, (s) => keyOf(s.current))
      if (Either.isLeft(key)) {
        return unsent(failed("no_signing_secret", "The account has no usable signing secret; nothing was sent.", NEVER_RETRY))
      }
      const publishing = Effect.flatMap(destinationOf(job), (found) => found.destination.publish({
        id: job.id,
        accountId: job.data.account_id,
        headers: WebhookSigner.headers({
          key: key.right,
          // A previous secret that no longer imports is left out: the current signature still goes.
          previous: Either.isRight(set) && Option.isSome(set.right.previous)
            ? Either.getOrUndefined(keyOf(set.right.previous.value))
            : undefined,
          id: job.id,
          timestamp: Math.floor(startedAt / 1000),
          body
        }),
        body,
        target: found.target
      }).pipe(Effect.tap(() => afterPublish(job, found)))).pipe(
        // The destination cannot be loaded (its kind is not served by this process, its credentials do not open): not sent.
        Effect.catchTag("DestinationRefused", (refused) =>
          Effect.succeed<Outcome>({ _tag: "Permanent", errorClass: "destination_unavailable", error: refused.message, statusCode: null }))
      )
      return Effect.map(publishing, (outcome): Attempted => ({
        classified: fromOutcome(outcome),
        durationMs: outcome.durationMs ?? clock.unsafeCurrentTimeMillis() - startedAt,
        // Refused before sending (the destination could not be loaded): the origin said nothing.
        outcome: outcome._tag === "Permanent" && outcome.errorClass === "destination_unavailable" ? undefined : outcome
      }))
    })
  }

  // Whether `lifecycle` has anything to do: not for a success of a subscription that was not failing.
  const changesSubscription = (job: JobQueue.Job<DeliveryJob>, classified: Classified) =>
    job.data.subscription_id !== null && (classified._tag !== "Delivered" || job.data.subscription_state === "failing")

  // What the answer does to the subscription, before the delivery's own state change.
  const lifecycle = Effect.fn("DeliveryWorker.lifecycle")(function*(
    job: JobQueue.Job<DeliveryJob>,
    classified: Classified,
    originFailingSince: Date | null
  ) {
    const subscriptionId = job.data.subscription_id
    if (subscriptionId === null) return classified
    if (classified._tag === "Delivered") {
      if (job.data.subscription_state === "failing") yield* SubscriptionLifecycle.noteSuccess(subscriptionId)
      return classified
    }
    if (classified._tag === "Ended") {
      if (classified.reason !== "gone" || classified.errorClass !== "gone") return classified
      const gone = yield* sql.withTransaction(SubscriptionLifecycle.markGone(subscriptionId, job.id))
      if (Option.isSome(gone.removed)) {
        yield* Audit.record("subscription.removed", {
          account_id: gone.removed.value,
          subscription_id: subscriptionId,
          reason: "gone",
          delivery_id: job.id,
          deliveries_ended: gone.ended
        })
      }
      return classified
    }
    if (classified.errorClass === "subscription_removed") return classified
    const disabled = yield* SubscriptionLifecycle.noteFailure(subscriptionId, job.attempt === 1, policy, classified.error, originFailingSince)
    if (!disabled) return classified
    const ended = yield* SubscriptionLifecycle.endPending(subscriptionId, "disabled", job.id)
    yield* Audit.record("subscription.disabled", {
      account_id: job.data.account_id,
      subscription_id: subscriptionId,
      reason: SubscriptionLifecycle.autoDisabledReason(policy, classified.error),
      deliveries_ended: ended
    })
    return {
      _tag: "Ended",
      statusCode: classified.statusCode,
      reason: "disabled",
      errorClass: classified.errorClass,
      error: `${classified.error} The subscription was disabled (every attempt failed for ${Duration.format(policy.disableAfter)}).`
    } satisfies Classified
  })

  // What the attempt decided: the attempt row, the log line, and the job's result.
  const decide = (
    job: JobQueue.Job<DeliveryJob>,
    startedAt: number,
    durationMs: number,
    classified: Classified,
    delay: Option.Option<Duration.Duration>,
    held: boolean
  ): Effect.Effect<JobQueue.JobResult> => {
    const result: AttemptResult = classified._tag === "Delivered"
      ? "delivered"
      : classified._tag === "Ended"
      ? "ended"
      : held || Option.isSome(delay)
      ? "retry"
      : "failed"
    const record: AttemptRecord = {
      delivery_id: job.id,
      attempt: job.attempt,
      started_at: new Date(startedAt),
      status_code: classified.statusCode,
      duration_ms: Math.max(0, Math.round(durationMs)),
      error_class: classified._tag === "Delivered" ? null : classified.errorClass,
      error: classified._tag === "Delivered" ? null : classified.error,
      result
    }
    // Logged in the statement that stores the outcome (with other deliveries' outcomes), even if the lease was lost.
    const logRow = attemptRow(record)
    const jobResult = (): JobQueue.JobResult => {
      if (classified._tag === "Delivered") return JobQueue.JobResult.Complete({ set: { delivered_at: record.started_at }, log: logRow })
      if (classified._tag === "Ended") {
        return JobQueue.JobResult.End({ status: "ended", reason: classified.error, set: { end_reason: classified.reason }, log: logRow })
      }
      // Held with its origin: due again at once, claimed when the origin answers (or as its probe); not a step of its schedule.
      if (held) {
        return JobQueue.JobResult.Retry({
          delay: Duration.zero,
          error: classified.error,
          log: logRow,
          set: { held_attempts: job.data.held_attempts + 1 }
        })
      }
      if (Option.isSome(delay)) return JobQueue.JobResult.Retry({ delay: delay.value, error: classified.error, log: logRow })
      const error = classified.failure.retryable
        ? `Gave up after ${job.attempt} attempt${job.attempt === 1 ? "" : "s"}: ${classified.error}`
        : classified.error
      return JobQueue.JobResult.DeadLetter({ error, log: logRow })
    }

    const level = result === "failed" ? LogLevel.Warning : LogLevel.Info
    return Effect.flatMap(FiberRef.get(FiberRef.currentMinimumLogLevel), (minimum) =>
      LogLevel.greaterThanEqual(level, minimum)
        ? Effect.as(
          Effect.logWithLevel(level, "Webhook delivery attempt").pipe(Effect.annotateLogs({
            delivery_id: job.id,
            account_id: job.data.account_id,
            attempt: job.attempt,
            target_host: hostOf(job.data.target_url),
            status_code: record.status_code,
            duration_ms: record.duration_ms,
            error_class: record.error_class,
            result,
            ...(held ? { held: true } : Option.isSome(delay) ? { retry_in_ms: Duration.toMillis(delay.value) } : {}),
            ...(job.data.origin_state === "probe" ? { probe: true } : {})
          })),
          jobResult()
        )
        : Effect.sync(jobResult))
  }

  const noDelay = Effect.succeed(Option.none<Duration.Duration>())

  const notifier = yield* Notifier.Notifier
  // What the answer says of its origin (OriginHealth): its failure, held or not; its return.
  type OriginNews = { readonly held: boolean; readonly failingSince: Date | null }
  const healthy: OriginNews = { held: false, failingSince: null }
  const originNews = (
    job: JobQueue.Job<DeliveryJob>,
    attempted: Attempted,
    startedAt: number
  ): Effect.Effect<OriginNews, never, SqlClient.SqlClient> => {
    const origin = job.key
    const probe = job.data.origin_state === "probe"
    const outcome = attempted.outcome
    if (origin === undefined) return Effect.succeed(healthy)
    if (outcome === undefined) return probe ? Effect.as(OriginHealth.releaseProbe(origin), healthy).pipe(Effect.orDie) : Effect.succeed(healthy)
    if (outcome._tag === "Transient" && OriginHealth.isUnavailable(outcome)) {
      return OriginHealth.noteFailure(origin, job.id, new Date(startedAt), probe, outcome.asked ?? Duration.zero, outcome.error, probes).pipe(
        Effect.tap((noted) =>
          Effect.zipRight(
            probe ? Metric.increment(OriginMetrics.originProbesByResult.failed) : Effect.void,
            noted.tripped
              ? Effect.logWarning("Receiver origin is failing; holding its deliveries and probing it").pipe(
                Effect.annotateLogs({ target_host: hostOf(job.data.target_url), failing_since: noted.failingSince?.toISOString() })
              )
              : Effect.void
          )
        ),
        Effect.orDie
      )
    }
    // The origin answered: a streak under way ends; a held origin is back, and what waited for it is due now.
    if (job.data.origin_state === null) return Effect.succeed(healthy)
    return OriginHealth.noteUp(origin).pipe(
      Effect.tap((since) =>
        Option.isNone(since) ? Effect.void : Effect.all([
          probe ? Metric.increment(OriginMetrics.originProbesByResult.recovered) : Effect.void,
          JobQueue.wake(table).pipe(Effect.provideService(Notifier.Notifier, notifier)),
          Effect.logInfo("Receiver origin answered again; delivering what was held for it").pipe(
            Effect.annotateLogs({ target_host: hostOf(job.data.target_url), failing_since: since.value.toISOString() })
          )
        ], { discard: true })
      ),
      Effect.as(healthy),
      Effect.orDie
    )
  }

  // Untraced: the runner's span of the attempt ("JobQueue.run deliveries") is the delivery's span.
  return (job: JobQueue.Job<DeliveryJob>): Effect.Effect<JobQueue.JobResult, never, SqlClient.SqlClient> =>
    Effect.suspend(() => {
      const startedAt = clock.unsafeCurrentTimeMillis()
      return Effect.flatMap(attemptOnce(job, startedAt), (attempted) => {
        // A database hiccup here must not lose the attempt: the answer still decides the delivery.
        const news = attempted.outcome === undefined && job.data.origin_state !== "probe"
          ? Effect.succeed(healthy)
          : originNews(job, attempted, startedAt).pipe(
            Effect.catchAllCause((cause) =>
              Effect.as(Effect.logWarning("Could not update the receiver origin's health after an attempt", cause), healthy)
            )
          )
        return Effect.flatMap(news, (origin) => {
          const classifiedNow = changesSubscription(job, attempted.classified)
            ? lifecycle(job, attempted.classified, origin.failingSince).pipe(
              Effect.catchAllCause((cause) =>
                Effect.as(Effect.logWarning("Could not update the subscription after an attempt", cause), attempted.classified)
              )
            )
            : Effect.succeed(attempted.classified)
          return Effect.flatMap(classifiedNow, (classified) => {
            const retryable = classified._tag === "Failed" && classified.failure.retryable
            const held = retryable && origin.held
            return Effect.flatMap(
              retryable && !held
                // The schedule steps over the attempts made while the origin was held.
                ? DeliverySchedule.delayAfter(Math.max(1, job.attempt - job.data.held_attempts), classified.failure)
                : noDelay,
              (delay) => decide(job, startedAt, attempted.durationMs, classified, delay, held)
            )
          })
        })
      })
    })
})

/**
 * Delivers due deliveries through the context's destination kinds until interrupted (interruption
 * is the clean shutdown: running attempts get the grace period, the rest are released).
 */
export const runWithKinds = (
  options: DeliveryWorkerOptions = {}
): Effect.Effect<never, never, DestinationKinds | Destinations | SigningSecrets | SqlClient.SqlClient | Notifier.Notifier> =>
  Effect.scoped(
    Effect.flatMap(
      makeHandler(options.autoDisable, options.probes, options.removalRecheck),
      (deliver) => JobQueue.run(table, deliver, { ...DEFAULT_OPTIONS, ...options })
    )
  )

/** The registry of the webhook kind alone, over the context's Egress. */
export const webhookOnly: Layer.Layer<DestinationKinds, never, Egress> = DestinationKinds.layerOf(WebhookDestination.registered)

/** `runWithKinds` with the webhook kind alone (over the context's Egress). */
export const run = (
  options: DeliveryWorkerOptions = {}
): Effect.Effect<never, never, Egress | Vault | SigningSecrets | SqlClient.SqlClient | Notifier.Notifier> =>
  runWithKinds(options).pipe(Effect.provide(Destinations.Default.pipe(Layer.provideMerge(webhookOnly))))
