/**
 * The receiver lifecycle's workers (ROLE all|worker): recoveries (replays
 * of a subscription's failed and ended deliveries, one at a time, in
 * batches) and retention (finished rows pruned in small batches), with the
 * policies read from the settings.
 */
import { OriginHealth, Recoveries, SubscriptionLifecycle } from "@crm-relay/events"
import { type Notifier, Retention } from "@crm-relay/store"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Option } from "effect"
import type { LifecycleSettings } from "../config/Settings.js"
import type * as Workers from "./Workers.js"

/** The auto-disable policy of `settings`. */
export const autoDisablePolicy = (settings: LifecycleSettings): SubscriptionLifecycle.AutoDisablePolicy => ({
  disableAfter: settings.webhookDisableAfter,
  minFailures: settings.webhookDisableMinFailures
})

/** How failing receiver origins are probed under `settings` (OriginHealth). */
export const probePolicy = (settings: LifecycleSettings): OriginHealth.ProbePolicy => ({
  ...OriginHealth.DEFAULT_PROBE_POLICY,
  max: settings.receiverProbeMaxInterval,
  first: Duration.min(OriginHealth.DEFAULT_PROBE_POLICY.first, settings.receiverProbeMaxInterval)
})

/** The retention policy of `settings` (payloads kept as long as their rows unless said otherwise). */
export const retentionPolicy = (settings: LifecycleSettings): Retention.RetentionPolicy => ({
  ...Retention.DEFAULT_POLICY,
  period: settings.retentionPeriod,
  payloadPeriod: Option.getOrElse(settings.retentionPayloadPeriod, () => settings.retentionPeriod),
  batchSize: settings.retentionBatchSize
})

/** Runs recoveries as they are asked for. */
export const recoveryWorker: Workers.Worker<SqlClient.SqlClient | Notifier.Notifier> = {
  name: "subscription-recovery",
  run: Recoveries.run()
}

/** Prunes finished rows after the retention period. */
export const retentionWorker = (policy: Retention.RetentionPolicy): Workers.Worker<SqlClient.SqlClient> => ({
  name: "retention",
  run: Retention.run(policy)
})

/** The defaults, for servers built without settings (tests). */
export const defaults: LifecycleSettings = {
  retentionPeriod: Retention.DEFAULT_POLICY.period,
  retentionPayloadPeriod: Option.none(),
  retentionBatchSize: Retention.DEFAULT_POLICY.batchSize,
  webhookDisableAfter: SubscriptionLifecycle.DEFAULT_POLICY.disableAfter,
  webhookDisableMinFailures: SubscriptionLifecycle.DEFAULT_POLICY.minFailures,
  receiverProbeMaxInterval: OriginHealth.DEFAULT_PROBE_POLICY.max
}
