/**
 * The destination kinds this server delivers to: the one list a new kind's
 * Layer is added to (its file, its configuration Schema in the contract, and
 * this line). The worker, the lifecycle and the APIs look kinds up by name.
 */
import type { BrokerEgress, Egress } from "@crm-relay/bridge"
import { DestinationKinds, Destinations, NatsDestination, RabbitmqDestination, WebhookDestination } from "@crm-relay/events"
import type { Notifier, Vault } from "@crm-relay/store"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"

/** The registry of the server's kinds. */
export const kinds: Layer.Layer<DestinationKinds, never, Egress | BrokerEgress> = DestinationKinds.layerOf<
  never,
  Egress | BrokerEgress | DestinationKinds
>(
  WebhookDestination.registered,
  RabbitmqDestination.registered,
  NatsDestination.registered
)

/** The account's destinations over the server's kinds (and the kinds themselves). */
export const layer: Layer.Layer<
  Destinations.Destinations | DestinationKinds,
  never,
  Egress | BrokerEgress | Vault.Vault | SqlClient.SqlClient | Notifier.Notifier
> =
  Destinations.Destinations.Default.pipe(Layer.provideMerge(kinds))
