/**
 * The post-call pipeline's services (outcomes, routing, CRM push jobs and
 * receipts, event fan-out) over the database and the Event API services,
 * and the CRM push worker.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Connections, CrmPushJobs, CrmPushReceipts, CrmPushWorker, Outcomes, Routing } from "@crm-relay/calls"
import { Fanout } from "@crm-relay/events"
import type { Notifier } from "@crm-relay/store"
import { Duration, Effect, Layer, Option } from "effect"
import type * as Workers from "./Workers.js"

/** Outcomes, routing, push jobs and receipts, and the fan-out. */
export const ServicesLive = Outcomes.Outcomes.Default.pipe(
  Layer.provideMerge(
    Layer.mergeAll(
      Routing.Routing.Default,
      CrmPushJobs.CrmPushJobs.Default,
      CrmPushReceipts.CrmPushReceipts.Default,
      Fanout.Fanout.Default
    )
  )
)

/** Lease of a running push job (a heartbeat extends it); a killed worker's job is claimed again this soon after. */
export const PUSH_LEASE = Duration.seconds(10)

/**
 * The CRM push worker, reading each tenant's connection (decrypted) when a
 * job runs. (On PGlite the queue takes back a crashed previous run's leases
 * at start, so its jobs run at once after a restart.)
 */
export const pushWorker: Workers.Worker<
  Connections.Connections | CrmPushWorker.WorkerServices | SqlClient.SqlClient | Notifier.Notifier
> = {
  name: "crm-push",
  run: Effect.gen(function*() {
    const connections = yield* Connections.Connections
    const lookup: CrmPushWorker.ConnectionLookup = (accountId, tenantId) =>
      Effect.map(connections.find(accountId, tenantId), Option.map((stored) => ({
        connection: stored.connection,
        capabilities: Option.some(stored.capabilities.operations)
      })))
    return yield* CrmPushWorker.run(lookup, { lease: PUSH_LEASE })
  })
}
