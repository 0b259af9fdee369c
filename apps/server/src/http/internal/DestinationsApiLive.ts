/**
 * Handlers of the destinations group of the internal API (see the contract's
 * DestinationsApi): create (after the kind's check), list, show, remove,
 * disable, enable and test. A refusal is a 400 with the kind's sentence and
 * nothing stored; an unknown account or destination is a 404.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Events } from "@crm-relay/contract"
import type { CreateDestinationRequest, DestinationView } from "@crm-relay/contract/Destinations"
import { Accounts, type Destination, Destinations, Fanout, SubscriptionLifecycle } from "@crm-relay/events"
import { Effect, Layer, Option, Redacted } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import * as DestinationKindsLive from "../../workers/DestinationKindsLive.js"

const isoOrNull = (date: Date | null) => (date === null ? null : date.toISOString())

/** A destination for its owner (never its credentials). */
export const destinationView = (d: Destinations.DestinationSummary): DestinationView => ({
  id: d.id,
  kind: d.kind,
  name: d.name,
  event: d.event,
  config: typeof d.config === "object" && d.config !== null ? { ...d.config } : {},
  has_credentials: d.has_credentials,
  subscription_id: d.subscription_id,
  state: d.disabled_at !== null ? "disabled" : d.failing_since !== null ? "failing" : "active",
  created_at: d.created_at.toISOString(),
  failing_since: isoOrNull(d.failing_since),
  disabled_at: isoOrNull(d.disabled_at),
  disabled_reason: d.disabled_reason
})

/**
 * What `Destinations.create` takes for a create request of `accountId` (the internal API's or the
 * Integrations area's: one request Schema): the credentials as their kind's JSON text, redacted.
 */
export const newDestination = (accountId: string, payload: CreateDestinationRequest): Destinations.NewDestination => ({
  accountId,
  kind: payload.kind,
  name: payload.name,
  event: payload.event,
  config: payload.config,
  credentials: payload.credentials === undefined ? Option.none() : Option.some(Redacted.make(JSON.stringify(payload.credentials)))
})

const notFound = (error: Destinations.DestinationNotFound) => new Events.NotFound({ error: error.message })
const refused = (error: Destination.DestinationRefused) => new Events.BadRequest({ error: error.message })

const DestinationsLive = HttpApiBuilder.group(InternalApi, "destinations", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const destinations = yield* Destinations.Destinations
    const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
    const fanout = yield* Fanout.Fanout
    const known = (id: string) =>
      Effect.flatMap(accounts.find(id), (account) => (Option.isNone(account) ? unknownAccount() : Effect.succeed(account.value.id)))
    const owned = (id: string, destinationId: string) =>
      Effect.flatMap(known(id), (accountId) =>
        Effect.map(destinations.find(accountId, destinationId), (d) => ({ accountId, destination: d })))
    return handlers
      .handle("create", ({ path, payload }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => destinations.create(newDestination(accountId, payload))),
          Effect.map(destinationView),
          Effect.catchTag("DestinationRefused", refused)
        ))
      .handle("list", ({ path }) =>
        Effect.flatMap(known(path.id), (accountId) =>
          Effect.map(destinations.list(accountId), (items) => ({ items: items.map(destinationView) }))))
      .handle("show", ({ path }) =>
        owned(path.id, path.destinationId).pipe(
          Effect.map(({ destination }) => destinationView(destination)),
          Effect.catchTag("DestinationNotFound", notFound)
        ))
      .handle("remove", ({ path }) =>
        owned(path.id, path.destinationId).pipe(
          Effect.flatMap(({ accountId }) => destinations.remove(accountId, path.destinationId)),
          Effect.catchTag("DestinationNotFound", notFound)
        ))
      .handle("disable", ({ path, payload }) =>
        owned(path.id, path.destinationId).pipe(
          Effect.flatMap(({ accountId, destination }) =>
            lifecycle.disable(accountId, destination.subscription_id, payload.reason ?? "Disabled by the operator.")),
          Effect.map((outcome) => ({ id: path.destinationId, outcome })),
          Effect.catchTag("DestinationNotFound", notFound),
          Effect.catchTag("SubscriptionNotFound", (e) => new Events.NotFound({ error: e.message }))
        ))
      .handle("enable", ({ path }) =>
        owned(path.id, path.destinationId).pipe(
          Effect.flatMap(({ accountId, destination }) => lifecycle.enable(accountId, destination.subscription_id)),
          Effect.map((outcome) => ({ id: path.destinationId, outcome })),
          Effect.catchTag("DestinationNotFound", notFound),
          Effect.catchTag("SubscriptionNotFound", (e) => new Events.NotFound({ error: e.message }))
        ))
      .handle("test", ({ path }) =>
        owned(path.id, path.destinationId).pipe(
          Effect.flatMap(({ accountId, destination }) => fanout.test(accountId, destination.subscription_id)),
          Effect.flatMap(Option.match({
            onNone: () => new Events.NotFound({ error: "No destination of this account has this id." }),
            onSome: (id) => Effect.succeed({ delivery_id: id })
          })),
          Effect.catchTag("DestinationNotFound", notFound)
        ))
  }))

/** The destinations handlers, with the server's destination kinds (needs the database, the Vault, egress, Accounts, Fanout). */
export const layer = DestinationsLive.pipe(
  Layer.provide(Layer.mergeAll(DestinationKindsLive.layer, SubscriptionLifecycle.SubscriptionLifecycle.Default))
)
