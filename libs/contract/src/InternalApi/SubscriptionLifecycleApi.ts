/**
 * The receiver lifecycle on the internal API (Bearer ADMIN_TOKEN), for the
 * operator, the CLI's remote mode and the Integrations area:
 *
 * - `GET /v1/accounts/{id}/subscriptions/{subscriptionId}` → the
 *   subscription's state: `active`, `failing` (since when every attempt
 *   failed), `disabled` (when and why) or `removed` (when and why: `gone`
 *   after a 410, `unsubscribed` otherwise).
 * - `POST .../{subscriptionId}/disable` `{reason?}` → 200 `{id, outcome}`;
 *   its pending deliveries end as `disabled`.
 * - `POST .../{subscriptionId}/enable` → 200 `{id, outcome}`: new events
 *   are delivered again and the failure clock starts afresh.
 * - `POST .../{subscriptionId}/recover` `{since, until?}` → 202, a
 *   recovery: every failed or ended delivery of the subscription created
 *   from `since` to `until` (default now) is queued again (same
 *   `webhook-id`), in the background; `GET /v1/accounts/{id}/recoveries/{recoveryId}`
 *   → its progress.
 *
 * Errors (the Error object): an unknown account, or an unknown, removed or
 * other account's subscription → 404; a window in the future or reversed →
 * 400; recovering a disabled subscription → 409 (enable it first). A refused
 * request changes nothing. The group gets the admin-token middleware where
 * the internal API adds it.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import * as Events from "../Events.js"

/** 409: the subscription is disabled; enable it, then recover. */
export class SubscriptionDisabled extends Schema.TaggedError<SubscriptionDisabled>()("SubscriptionDisabled", {
  error: Schema.String
}) {
  static readonly wire = Events.errorObject(this, 409, "The subscription is disabled; enable it first, then recover.", "SubscriptionDisabledError")
}

const subscriptionPath = Schema.Struct({ id: Schema.String, subscriptionId: Schema.String })

/** Where a subscription stands. */
export const SubscriptionState = Schema.Literal("active", "failing", "disabled", "removed")
  .annotations({ identifier: "SubscriptionState" })
export type SubscriptionState = typeof SubscriptionState.Type

/** A subscription and its lifecycle (times as ISO strings). */
export const SubscriptionStatus = Schema.Struct({
  id: Schema.String,
  event: Schema.String,
  /** The receiver URL; a query string is shown as `?…`. */
  target: Schema.String,
  created_at: Schema.String,
  state: SubscriptionState,
  /** Since when every attempt has failed (the auto-disable clock); null when it does not run. */
  failing_since: Schema.NullOr(Schema.String),
  disabled_at: Schema.NullOr(Schema.String),
  disabled_reason: Schema.NullOr(Schema.String),
  removed_at: Schema.NullOr(Schema.String),
  /** `gone`: the receiver answered 410 Gone; `unsubscribed`: removed through the Event API or by the operator. */
  removed_reason: Schema.NullOr(Schema.String)
}).annotations({ identifier: "SubscriptionStatus" })
export type SubscriptionStatus = typeof SubscriptionStatus.Type

/** POST .../disable body. */
export const DisableRequest = Schema.Struct({
  reason: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(500)), { exact: true })
}).annotations({ identifier: "DisableSubscriptionRequest" })

/** What enable or disable did (`already_…`: nothing to do). */
export const ToggleAnswer = Schema.Struct({
  id: Schema.String,
  outcome: Schema.Literal("enabled", "already_enabled", "disabled", "already_disabled")
}).annotations({ identifier: "SubscriptionToggleAnswer" })
export type ToggleAnswer = typeof ToggleAnswer.Type

const instant = (name: string) =>
  Schema.Date.annotations({ message: () => `${name} must be a date and time, e.g. 2026-01-31T12:00:00Z` })

/** POST .../recover body: the window of creation times to replay. */
export const RecoverRequest = Schema.Struct({
  since: instant("since"),
  until: Schema.optionalWith(instant("until"), { exact: true })
}).annotations({ identifier: "RecoverRequest" })
export type RecoverRequest = typeof RecoverRequest.Type

/** A recovery and its progress. */
export const RecoveryView = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  subscription_id: Schema.String,
  since: Schema.String,
  until: Schema.String,
  /** `running` (waiting or under way), `done`, or `failed` (see `last_error`). */
  status: Schema.Literal("running", "done", "failed"),
  /** Failed or ended deliveries in the window when the recovery was asked for. */
  total: Schema.Int,
  /** Queued again so far (each then runs as a new delivery attempt). */
  queued: Schema.Int,
  /** Not sent again: their payload had been dropped by retention. */
  skipped: Schema.Int,
  created_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Recovery" })
export type RecoveryView = typeof RecoveryView.Type

/** Subscription state, disable, enable and recover. */
export class SubscriptionLifecycleGroup extends HttpApiGroup.make("subscriptionLifecycle")
  .add(
    HttpApiEndpoint.get("show", "/v1/accounts/:id/subscriptions/:subscriptionId")
      .annotate(OpenApi.Summary, "Get a subscription's state")
      .setPath(subscriptionPath)
      .addSuccess(SubscriptionStatus)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("disable", "/v1/accounts/:id/subscriptions/:subscriptionId/disable")
      .annotate(OpenApi.Summary, "Disable a subscription")
      .setPath(subscriptionPath)
      .setPayload(DisableRequest)
      .addSuccess(ToggleAnswer)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("enable", "/v1/accounts/:id/subscriptions/:subscriptionId/enable")
      .annotate(OpenApi.Summary, "Enable a subscription")
      .setPath(subscriptionPath)
      .addSuccess(ToggleAnswer)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("recover", "/v1/accounts/:id/subscriptions/:subscriptionId/recover")
      .annotate(OpenApi.Summary, "Send a subscription's failed deliveries again")
      .setPath(subscriptionPath)
      .setPayload(RecoverRequest)
      .addSuccess(RecoveryView, { status: 202 })
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
      .addError(SubscriptionDisabled.wire)
  )
  .add(
    HttpApiEndpoint.get("recovery", "/v1/accounts/:id/recoveries/:recoveryId")
      .annotate(OpenApi.Summary, "Get a recovery's progress")
      .setPath(Schema.Struct({ id: Schema.String, recoveryId: Schema.String }))
      .addSuccess(RecoveryView)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "A subscription's state, and disabling, enabling and recovering it.")
{}
