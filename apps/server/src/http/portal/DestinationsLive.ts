/**
 * The destinations group of the Integrations area's API: the session's
 * account's event destinations, through the same services the internal API
 * and the CLI use (Destinations, SubscriptionLifecycle, Fanout's test event),
 * so each change writes its audit line naming the session. Another account's
 * destination id is answered 404, as an unknown one.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Events, PortalApi } from "@crm-relay/contract"
import { type Destination, Deliveries, Destinations, Fanout, SubscriptionLifecycle } from "@crm-relay/events"
import { Effect, Layer, Option } from "effect"
import { displayTarget } from "../internal/DeliveriesApiLive.js"
import { destinationView, newDestination } from "../internal/DestinationsApiLive.js"
import * as DestinationKindsLive from "../../workers/DestinationKindsLive.js"
import { deliveryView } from "./ActivityLive.js"
import { messages } from "./PortalMessages.js"

const { CurrentSession } = PortalApi

/** The configuration's `url`: every kind's names its target. */
const urlOf = (config: unknown): string =>
  typeof config === "object" && config !== null && "url" in config && typeof config.url === "string" ? config.url : ""

/**
 * A refused creation in the page's words: a form the kind cannot take is a 400 (its sentence
 * names the field); a check that did not pass is a 422 with what to change next.
 */
const refusal = (error: Destination.DestinationRefused): Events.BadRequest | PortalApi.DestinationCheckFailed => {
  const next = messages.destinationNextStep[error.reason]
  if (next === undefined) return new Events.BadRequest({ error: error.message })
  return new PortalApi.DestinationCheckFailed({ error: error.message, next_step: next })
}

const notFound = () => new Events.NotFound({ error: messages.unknownDestination })

const Handlers = HttpApiBuilder.group(PortalApi.PortalApi, "destinations", (handlers) =>
  Effect.gen(function*() {
    const destinations = yield* Destinations.Destinations
    const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
    const fanout = yield* Fanout.Fanout
    const deliveries = yield* Deliveries.Deliveries

    const view = (d: Destinations.DestinationSummary) =>
      Effect.map(
        deliveries.list(d.account_id, { limit: PortalApi.RECENT_DELIVERIES, subscriptionId: d.subscription_id }).pipe(
          // No cursor is given, so none can be unknown.
          Effect.orDie
        ),
        (page): PortalApi.PortalDestinationView => ({
          ...destinationView(d),
          target: displayTarget(urlOf(d.config)),
          recent_deliveries: page.deliveries.map(deliveryView)
        })
      )

    // The session's account's destination, or 404: an id of another account is as unknown as a made-up one.
    const own = (id: string) =>
      Effect.flatMap(CurrentSession, ({ accountId }) =>
        destinations.find(accountId, id).pipe(Effect.catchTag("DestinationNotFound", () => Effect.fail(notFound()))))

    return handlers
      .handle("list", () =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          Effect.map(
            Effect.flatMap(destinations.list(accountId), (all) => Effect.forEach(all, view)),
            (all) => ({ destinations: all })
          )))
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          destinations.create(newDestination(accountId, payload)).pipe(
            Effect.catchTag("DestinationRefused", (error) => Effect.fail(refusal(error))),
            Effect.flatMap(view)
          )))
      .handle("show", ({ path }) => Effect.flatMap(own(path.id), view))
      .handle("disable", ({ path }) =>
        Effect.flatMap(own(path.id), (d) =>
          lifecycle.disable(d.account_id, d.subscription_id, messages.disabledHere).pipe(
            Effect.map((outcome) => ({ id: path.id, outcome })),
            Effect.catchTag("SubscriptionNotFound", () => Effect.fail(notFound()))
          )))
      .handle("enable", ({ path }) =>
        Effect.flatMap(own(path.id), (d) =>
          lifecycle.enable(d.account_id, d.subscription_id).pipe(
            Effect.map((outcome) => ({ id: path.id, outcome })),
            Effect.catchTag("SubscriptionNotFound", () => Effect.fail(notFound()))
          )))
      .handle("remove", ({ path }) =>
        Effect.flatMap(own(path.id), (d) =>
          destinations.remove(d.account_id, d.id).pipe(Effect.catchTag("DestinationNotFound", () => Effect.fail(notFound())))))
      .handle("test", ({ path }) =>
        Effect.flatMap(own(path.id), (d) =>
          Effect.flatMap(
            fanout.test(d.account_id, d.subscription_id),
            Option.match({ onNone: () => Effect.fail(notFound()), onSome: (id) => Effect.succeed({ delivery_id: id }) })
          )))
  }))

/** The destinations handlers, with the server's destination kinds (the same Layer the internal API uses). */
export const DestinationsLive = Handlers.pipe(Layer.provide(DestinationKindsLive.layer))
