/**
 * The Integrations area's event destinations: the signed-in account's
 * webhooks, RabbitMQ exchanges and NATS JetStream subjects, managed as the
 * internal API manages them (the same request and view, described once in
 * `Destinations`), always for the session's own account. Creating one
 * connects and checks it first; a refusal is one sentence and a next step,
 * and nothing is stored. Credentials go in once and are never shown again.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CreateDestinationRequest, DestinationView } from "../Destinations.js"
import { BadRequest, errorObject, NotFound } from "../Events.js"
import { TestSent } from "../InternalApi/DestinationsApi.js"
import { ToggleAnswer } from "../InternalApi/SubscriptionLifecycleApi.js"
import { DeliveryView } from "./ActivityApi.js"
import { PortalAuth } from "./PortalAuth.js"

/** The create form's body: the internal API's request (kind, name, event, the kind's config, credentials). */
export { CreateDestinationRequest }

/** How many of a destination's latest deliveries its view carries. */
export const RECENT_DELIVERIES = 5

/** A destination in the page: the internal API's view, where it sends, and its latest deliveries. */
export const PortalDestinationView = Schema.Struct({
  ...DestinationView.fields,
  /** Scheme, host and path of the configuration's `url` (never credentials, a query or a fragment). */
  target: Schema.String,
  /** Its latest deliveries, newest first (at most `RECENT_DELIVERIES`). */
  recent_deliveries: Schema.Array(DeliveryView)
}).annotations({ identifier: "PortalDestination" })
export type PortalDestinationView = typeof PortalDestinationView.Type

/** GET /api/destinations: the account's destinations, oldest first. */
export const DestinationList = Schema.Struct({
  destinations: Schema.Array(PortalDestinationView)
}).annotations({ identifier: "PortalDestinationList" })
export type DestinationList = typeof DestinationList.Type

/**
 * 422: the destination's check did not pass (the broker could not be reached, refused the
 * credentials, has no such exchange or stream, or its address is not one crm-relay may reach);
 * `error` is the check's sentence and `next_step` what to change. Nothing was stored.
 */
export class DestinationCheckFailed extends Schema.TaggedError<DestinationCheckFailed>()("DestinationCheckFailed", {
  error: Schema.String,
  next_step: Schema.optionalWith(Schema.String, { exact: true })
}) {
  static readonly wire = errorObject(this, 422, "The destination's check did not pass; nothing was stored.", "PortalDestinationCheckFailedError")
}

const destinationPath = Schema.Struct({ id: Schema.String })

/** The account's destinations: list, create (checked first), show, disable, enable, remove, send a test event. */
export class DestinationsGroup extends HttpApiGroup.make("destinations")
  .add(
    HttpApiEndpoint.get("list", "/api/destinations")
      .annotate(OpenApi.Summary, "List event destinations")
      .addSuccess(DestinationList)
  )
  .add(
    HttpApiEndpoint.post("create", "/api/destinations")
      .annotate(OpenApi.Summary, "Create an event destination (checked first)")
      .setPayload(CreateDestinationRequest)
      .addSuccess(PortalDestinationView, { status: 201 })
      .addError(BadRequest.wire)
      .addError(DestinationCheckFailed.wire)
      .annotate(
        OpenApi.Description,
        "Connects to the destination and checks it (reachable, credentials accepted, the exchange or stream exists, the address allowed) " +
          "before storing it. 400 for a form the kind refuses (unknown kind, invalid configuration or credentials), 422 when the check fails; " +
          "either way nothing is stored."
      )
  )
  .add(
    HttpApiEndpoint.get("show", "/api/destinations/:id")
      .annotate(OpenApi.Summary, "Get an event destination")
      .setPath(destinationPath)
      .addSuccess(PortalDestinationView)
      .addError(NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("disable", "/api/destinations/:id/disable")
      .annotate(OpenApi.Summary, "Disable an event destination")
      .setPath(destinationPath)
      .addSuccess(ToggleAnswer)
      .addError(NotFound.wire)
      .annotate(OpenApi.Description, "Stops deliveries to the destination (its waiting deliveries end as `disabled`); it is kept, to enable again.")
  )
  .add(
    HttpApiEndpoint.post("enable", "/api/destinations/:id/enable")
      .annotate(OpenApi.Summary, "Enable an event destination")
      .setPath(destinationPath)
      .addSuccess(ToggleAnswer)
      .addError(NotFound.wire)
      .annotate(OpenApi.Description, "Delivers new events to a disabled destination again; its failure clock starts afresh.")
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/destinations/:id")
      .annotate(OpenApi.Summary, "Remove an event destination")
      .setPath(destinationPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("test", "/api/destinations/:id/test")
      .annotate(OpenApi.Summary, "Send a test event to an event destination")
      .setPath(destinationPath)
      .addSuccess(TestSent, { status: 202 })
      .addError(NotFound.wire)
      .annotate(OpenApi.Description, "Queues a test event, delivered, signed and logged like any other; follow it with GET /api/deliveries/{id}.")
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The account's event destinations (webhook, RabbitMQ, NATS JetStream).")
{}
