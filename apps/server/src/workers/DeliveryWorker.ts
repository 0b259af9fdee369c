/**
 * The delivery worker (REST hooks and destinations) as the server runs it (ROLE all|worker): 128
 * deliveries at once per replica, at most DELIVERY_MAX_PER_ORIGIN (32) of
 * them to one receiver origin, 30 s leases kept by a heartbeat, woken by
 * the fan-out's NOTIFY; on the embedded database the leases of a crashed
 * previous run are taken back at start.
 */
import type { BrokerEgress, Egress } from "@crm-relay/bridge"
import { DeliveryWorker, EventFanout, type SigningSecrets } from "@crm-relay/events"
import type { Notifier, Vault } from "@crm-relay/store"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import { deliveryMaxPerOrigin } from "../config/Settings.js"
import * as DestinationKindsLive from "./DestinationKindsLive.js"
import type * as Workers from "./Workers.js"

/** The webhook delivery worker with `options` (e.g. the auto-disable policy from the settings). */
export const deliveryWorkerWith = (options: DeliveryWorker.DeliveryWorkerOptions): Workers.Worker<
  Egress | BrokerEgress | Vault.Vault | SigningSecrets.SigningSecrets | SqlClient.SqlClient | Notifier.Notifier
> => ({
  name: "webhook-delivery",
  // DELIVERY_MAX_PER_ORIGIN was checked with the other settings at start.
  run: Effect.flatMap(Effect.orDie(deliveryMaxPerOrigin), (most) =>
    DeliveryWorker.runWithKinds({ ...options, ...Option.match(most, { onNone: () => ({}), onSome: (maxPerKey) => ({ maxPerKey }) }) }).pipe(
      // Every kind the server serves: a destination's delivery goes through its kind's Layer.
      Effect.provide(DestinationKindsLive.layer)
    ))
})

/** The webhook delivery worker. */
export const deliveryWorker = deliveryWorkerWith({})

/**
 * The fan-out worker: turns accepted events into their deliveries, a batch of subscriptions per statement
 * (EventFanout), woken by the intake (in this process when it runs here, else by its NOTIFY).
 */
export const fanoutWorker: Workers.Worker<SqlClient.SqlClient | Notifier.Notifier> = {
  name: "event-fanout",
  run: EventFanout.run()
}
