/**
 * Webhook deliveries on the internal API: what was sent to which receiver,
 * how it went, and replay.
 *
 * - `GET /v1/accounts/{id}/deliveries?limit=N&cursor=C` → the account's
 *   deliveries, latest first (status, attempts, last error, next attempt,
 *   latest attempt), `limit` 1..200 (default 50); `next_cursor` is given when
 *   there are older ones. Unknown account → 404; a cursor that is not one of
 *   the account's deliveries → 400.
 * - `GET /v1/deliveries/{id}` → one delivery with every attempt.
 * - `POST /v1/deliveries/{id}/replay` → 202: a delivered or failed delivery
 *   is queued again, due now, with the same `webhook-id`; a pending one is
 *   left as it is (`already_pending`). Unknown id → 404. A delivery whose
 *   subscription was removed or is disabled → 409 with the reason: it would
 *   be ended again without being sent.
 *
 * Target URLs are shown without their query string (receivers often put a
 * token there). The group gets the admin-token middleware where InternalApi
 * adds it (importing it here would be an import cycle).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import * as Deliveries from "../Deliveries.js"
import * as Events from "../Events.js"
import * as Pages from "../Pages.js"
import { Schema } from "effect"
import { ReplayAnswer } from "./ReplayAnswer.js"

/** The latest attempt of a delivery. */
export const AttemptView = Schema.Struct({
  attempt: Schema.Int,
  at: Schema.String,
  /** The receiver's status, or null when none came (timeout, network, refused). */
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error_class: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  result: Deliveries.AttemptResult
}).annotations({ identifier: "DeliveryAttempt" })
export type AttemptView = typeof AttemptView.Type

/** A delivery as the operator sees it (times as ISO strings). */
export const DeliveryView = Schema.Struct({
  id: Schema.String.annotations({ description: "The delivery id: the webhook-id header and the event's id." }),
  event: Schema.String,
  call_id: Schema.String,
  subscription_id: Schema.NullOr(Schema.String),
  /** The receiver URL; a query string is shown as `?…`. */
  target: Schema.String,
  status: Deliveries.DeliveryStatus,
  /** Attempts of the current run (a replay starts again from 0). */
  attempts: Schema.Int,
  last_error: Schema.NullOr(Schema.String),
  /** When the next attempt is due; null unless pending. */
  next_attempt_at: Schema.NullOr(Schema.String),
  /** Set while the delivery waits for its failing receiver origin (no attempt is spent meanwhile). */
  held: Schema.NullOr(Deliveries.HeldDelivery),
  created_at: Schema.String,
  delivered_at: Schema.NullOr(Schema.String),
  last_attempt: Schema.NullOr(Schema.Struct({
    at: Schema.String,
    status_code: Schema.NullOr(Schema.Int),
    error_class: Schema.NullOr(Schema.String)
  }))
}).annotations({ identifier: "DeliveryView" })
export type DeliveryView = typeof DeliveryView.Type

/** A page of deliveries. */
export const DeliveryPage = Schema.Struct({
  deliveries: Schema.Array(DeliveryView),
  next_cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "DeliveryPage" })
export type DeliveryPage = typeof DeliveryPage.Type

/** One delivery and all its attempts, oldest first. */
export const DeliveryDetail = Schema.Struct({
  ...DeliveryView.fields,
  attempt_log: Schema.Array(AttemptView)
}).annotations({ identifier: "DeliveryDetail" })
export type DeliveryDetail = typeof DeliveryDetail.Type

/** Query of the listing. */
export const ListParams = Schema.Struct({
  limit: Schema.optionalWith(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "limit must be a whole number" }),
      Schema.between(1, Pages.MAX_PAGE, { message: () => `limit must be from 1 to ${Pages.MAX_PAGE}` })
    ),
    { exact: true }
  ),
  cursor: Schema.optionalWith(Schema.String, { exact: true })
})

/** 409: the delivery's subscription was removed or is disabled, so a replay would send nothing; `error` says which and what to do. */
export class DeliveryNotReplayable extends Schema.TaggedError<DeliveryNotReplayable>()("DeliveryNotReplayable", {
  error: Schema.String
}) {
  static readonly wire = Events.errorObject(
    this,
    409,
    "The delivery's subscription was removed or is disabled, so a replay would send nothing.",
    "DeliveryNotReplayableError"
  )
}

/** Webhook deliveries. */
export class DeliveriesGroup extends HttpApiGroup.make("deliveries")
  .add(
    HttpApiEndpoint.get("list", "/v1/accounts/:id/deliveries")
      .annotate(OpenApi.Summary, "List an account's webhook deliveries")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setUrlParams(ListParams)
      .addSuccess(DeliveryPage)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("find", "/v1/deliveries/:id")
      .annotate(OpenApi.Summary, "Get a webhook delivery and its attempts")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(DeliveryDetail)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/deliveries/:id/replay")
      .annotate(OpenApi.Summary, "Replay a webhook delivery")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(ReplayAnswer, { status: 202 })
      .addError(Events.NotFound.wire)
      .addError(DeliveryNotReplayable.wire)
  )
  .annotate(OpenApi.Description, "Webhook deliveries: list, inspect and replay.")
{}
