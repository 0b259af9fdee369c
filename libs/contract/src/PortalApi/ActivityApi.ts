/**
 * The Integrations area's activity: webhook deliveries (to hooks and
 * destinations alike) and CRM pushes, with replay. The destinations group
 * shows each destination's latest deliveries in the same `DeliveryView`.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import * as Deliveries from "../Deliveries.js"
import { BadRequest, errorObject, NotFound } from "../Events.js"
import { PortalAuth } from "./PortalAuth.js"

/** A delivery's state, as the internal API lists it. */
export const DeliveryStatus = Deliveries.DeliveryStatus

/** One webhook delivery in the activity list. */
export const DeliveryView = Schema.Struct({
  id: Schema.String,
  created_at: Schema.String,
  event: Schema.String,
  call_id: Schema.String,
  /** Scheme, host and path of the receiver (a query is hidden). */
  target: Schema.String,
  target_host: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  last_duration_ms: Schema.NullOr(Schema.Int),
  last_error_class: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  /** Why an `ended` delivery ended: `gone` (the receiver answered 410 Gone), `aborted` (abort-message) or `disabled`. */
  end_reason: Schema.NullOr(Schema.Literal("gone", "aborted", "disabled")),
  /** Set while the delivery waits for its failing receiver (no attempt is spent meanwhile). */
  held: Schema.NullOr(Deliveries.HeldDelivery),
  test: Schema.Boolean
}).annotations({ identifier: "PortalDelivery" })
export type DeliveryView = typeof DeliveryView.Type

export const AttemptView = Schema.Struct({
  attempt: Schema.Int,
  at: Schema.String,
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error_class: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  result: Deliveries.AttemptResult
}).annotations({ identifier: "PortalAttempt" })

export const DeliveryDetail = Schema.Struct({
  ...DeliveryView.fields,
  /** The JSON sent, exactly as signed. */
  payload: Schema.String,
  attempt_log: Schema.Array(AttemptView),
  /** Why it cannot be replayed (its subscription was removed or is disabled), in one sentence; null when it can. */
  not_replayable: Schema.NullOr(Schema.String)
}).annotations({ identifier: "PortalDeliveryDetail" })
export type DeliveryDetail = typeof DeliveryDetail.Type

export const DeliveryFilter = Schema.Struct({
  status: Schema.optionalWith(DeliveryStatus, { exact: true }),
  event: Schema.optionalWith(Schema.Literal("lead", "booking"), { exact: true }),
  cursor: Schema.optionalWith(Schema.String, { exact: true })
})

export const DeliveryPage = Schema.Struct({
  deliveries: Schema.Array(DeliveryView),
  next_cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "PortalDeliveryPage" })

/** A replay was asked: `queued` again, or it was still waiting and is left as it is. */
export const Replayed = Schema.Struct({ id: Schema.String, outcome: Schema.Literal("queued", "already_pending") }).annotations({
  identifier: "PortalReplayed"
})

/** One step of a CRM push and its receipt's id. */
export const PushStepView = Schema.Struct({
  operation: Schema.String,
  outcome: Schema.String,
  receipt_id: Schema.NullOr(Schema.String)
})

/** The CRM push of one call. */
export const PushView = Schema.Struct({
  id: Schema.String,
  call_id: Schema.String,
  tenant_id: Schema.String,
  status: Schema.Literal("pending", "succeeded", "failed"),
  attempts: Schema.Int,
  error_class: Schema.NullOr(Schema.String),
  /** Why it stopped, in one sentence. */
  last_error: Schema.NullOr(Schema.String),
  updated_at: Schema.String,
  steps: Schema.Array(PushStepView)
}).annotations({ identifier: "PortalPush" })
export type PushView = typeof PushView.Type

/** 409: a replay would do nothing (the push succeeded; the delivery's subscription was removed or is disabled); `error` says which. */
export class NothingToReplay extends Schema.TaggedError<NothingToReplay>()("NothingToReplay", { error: Schema.String }) {
  static readonly wire = errorObject(
    this,
    409,
    "A replay would do nothing: only a failed push can be replayed, and only a delivery whose subscription is neither removed nor disabled.",
    "PortalNothingToReplayError"
  )
}

const idPath = Schema.Struct({ id: Schema.String })

export class ActivityGroup extends HttpApiGroup.make("activity")
  .add(
    HttpApiEndpoint.get("deliveries", "/api/deliveries")
      .annotate(OpenApi.Summary, "List webhook deliveries")
      .setUrlParams(DeliveryFilter).addSuccess(DeliveryPage).addError(BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.get("delivery", "/api/deliveries/:id")
      .annotate(OpenApi.Summary, "Get a webhook delivery")
      .setPath(idPath).addSuccess(DeliveryDetail).addError(NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("replayDelivery", "/api/deliveries/:id/replay")
      .annotate(OpenApi.Summary, "Replay a webhook delivery")
      .setPath(idPath).addSuccess(Replayed, { status: 202 }).addError(
      NotFound.wire
    ).addError(NothingToReplay.wire)
  )
  .add(
    HttpApiEndpoint.get("pushes", "/api/pushes")
      .annotate(OpenApi.Summary, "List CRM pushes")
      .addSuccess(Schema.Struct({ pushes: Schema.Array(PushView) }))
  )
  .add(
    HttpApiEndpoint.post("replayPush", "/api/pushes/:id/replay")
      .annotate(OpenApi.Summary, "Replay a CRM push")
      .setPath(idPath)
      .addSuccess(Replayed, { status: 202 })
      .addError(NotFound.wire)
      .addError(NothingToReplay.wire)
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "Webhook deliveries and CRM pushes, with replay.")
{}
