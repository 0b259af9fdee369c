/**
 * Every series the server exports from its start, at 0 until something
 * counts in it, so an alert can be written before the first refusal. A
 * labelled metric's label values are a closed set declared next to the
 * metric, and the code that counts uses the same declaration.
 * Left out: the HTTP request series (their route and status are the
 * requests'), and histograms (their counter twin has the same labels and count).
 */
import * as Egress from "@crm-relay/bridge/Egress"
import * as BridgeClient from "@crm-relay/bridge/BridgeClient"
import * as TokenCache from "@crm-relay/bridge/TokenCache"
import { TransportRegistry } from "@crm-relay/bridge/TransportRegistry"
import * as CrmPushJobs from "@crm-relay/calls/CrmPush/Jobs"
import * as Deliveries from "@crm-relay/events/Deliveries"
import * as EventFanout from "@crm-relay/events/EventFanout"
import * as FailedKeys from "@crm-relay/events/FailedKeys"
import * as OriginMetrics from "@crm-relay/events/OriginMetrics"
import * as RateLimiter from "@crm-relay/events/RateLimiter"
import * as Recoveries from "@crm-relay/events/Recoveries"
import * as Subscriptions from "@crm-relay/events/Subscriptions"
import * as JobQueue from "@crm-relay/store/JobQueue"
import * as Retention from "@crm-relay/store/Retention"
import { Effect, type MetricLabel } from "effect"
import * as ConnectionLimits from "../http/ConnectionLimits.js"

/** What a declared series needs to be exported: reading it registers it (at 0 when nothing counted yet). */
interface Series {
  readonly unsafeValue: (extraTags: ReadonlyArray<MetricLabel.MetricLabel>) => unknown
}

/** The queue tables the server runs: the `queue` label's values of the job series. */
export const queueTables = [CrmPushJobs.jobTable, EventFanout.table, Deliveries.table, Recoveries.table].map((jobs) => jobs.table)

/** The transport kinds the server speaks: the `transport` label's values of the exchange series. */
export const transportKinds = TransportRegistry.defaultEntries.map((entry) => entry.kind)

/** Every declared series. */
export const declared: ReadonlyArray<Series> = [
  ...Object.values(Egress.refusalsByReason),
  ...Object.values(TokenCache.lookupsByResult),
  ...transportKinds.flatMap((kind) =>
    Object.values(BridgeClient.exchangeSeries(kind)).flatMap((byOutcome) => Object.values(byOutcome).map((series) => series.count))
  ),
  ...queueTables.flatMap((table) => Object.values(JobQueue.jobSeriesOf(table)).map((series) => series.count)),
  ...Object.values(Retention.prunedRowsByTable),
  Retention.droppedPayloads,
  ...Object.values(Retention.oldestKeptByTable),
  RateLimiter.refusals,
  FailedKeys.refusals,
  Subscriptions.limitRefusals,
  ...[ConnectionLimits.publicPort, ConnectionLimits.portal].flatMap((listener) => [
    listener.refused,
    listener.timedOut.head,
    listener.timedOut.request
  ]),
  OriginMetrics.failingOrigins,
  ...Object.values(OriginMetrics.originProbesByResult)
]

/** Registers every declared series, at 0 unless something counted already (idempotent). */
export const declare: Effect.Effect<void> = Effect.sync(() => {
  for (const series of declared) series.unsafeValue([])
})
