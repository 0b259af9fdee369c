/**
 * An account's event destinations on the internal API (Bearer ADMIN_TOKEN),
 * for the operator, the CLI's remote mode and the Integrations area. The
 * public Event API stays its three pairs: destinations are managed here only.
 *
 * - `POST /v1/accounts/{id}/destinations` `{kind, name, event?, config, credentials?}`
 *   → 201 the destination: created only after its kind connected and checked
 *   it (reachable, credentials accepted, the exchange or stream exists, the
 *   address allowed by the egress rules). Otherwise 400 with the sentence
 *   saying why, and nothing is stored.
 * - `GET /v1/accounts/{id}/destinations` → the account's destinations;
 *   `GET .../{destinationId}` → one.
 * - `DELETE .../{destinationId}` → 204: nothing more is queued for it.
 * - `POST .../{destinationId}/disable` `{reason?}` and `.../enable` → what it did.
 * - `POST .../{destinationId}/test` → 202 `{delivery_id}`: a test event,
 *   delivered, signed and logged like any other.
 *
 * Credentials are sealed at rest and never shown again.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CreateDestinationRequest, DestinationView } from "../Destinations.js"
import * as Events from "../Events.js"
import { DisableRequest, ToggleAnswer } from "./SubscriptionLifecycleApi.js"

const accountPath = Schema.Struct({ id: Schema.String })
const destinationPath = Schema.Struct({ id: Schema.String, destinationId: Schema.String })

/** POST .../test answer: the queued test delivery. */
export const TestSent = Schema.Struct({ delivery_id: Schema.String }).annotations({ identifier: "DestinationTestSent" })

/** Destinations: create (checked first), list, show, remove, disable, enable, test. */
export class DestinationsGroup extends HttpApiGroup.make("destinations")
  .add(
    HttpApiEndpoint.post("create", "/v1/accounts/:id/destinations")
      .annotate(OpenApi.Summary, "Create a destination (checked first)")
      .setPath(accountPath)
      .setPayload(CreateDestinationRequest)
      .addSuccess(DestinationView, { status: 201 })
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/accounts/:id/destinations")
      .annotate(OpenApi.Summary, "List an account's destinations")
      .setPath(accountPath)
      .addSuccess(Schema.Struct({ items: Schema.Array(DestinationView) }))
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("show", "/v1/accounts/:id/destinations/:destinationId")
      .annotate(OpenApi.Summary, "Get a destination")
      .setPath(destinationPath)
      .addSuccess(DestinationView)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/accounts/:id/destinations/:destinationId")
      .annotate(OpenApi.Summary, "Remove a destination")
      .setPath(destinationPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("disable", "/v1/accounts/:id/destinations/:destinationId/disable")
      .annotate(OpenApi.Summary, "Disable a destination")
      .setPath(destinationPath)
      .setPayload(DisableRequest)
      .addSuccess(ToggleAnswer)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("enable", "/v1/accounts/:id/destinations/:destinationId/enable")
      .annotate(OpenApi.Summary, "Enable a destination")
      .setPath(destinationPath)
      .addSuccess(ToggleAnswer)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("test", "/v1/accounts/:id/destinations/:destinationId/test")
      .annotate(OpenApi.Summary, "Send a test event to a destination")
      .setPath(destinationPath)
      .addSuccess(TestSent, { status: 202 })
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "An account's event destinations (webhook, RabbitMQ, NATS JetStream): created after a check, credentials sealed.")
{}
