/**
 * Handlers of the receiver lifecycle group of the internal API (see the
 * contract's SubscriptionLifecycleApi): subscription state, disable, enable,
 * recover and its progress. The views are shared with the CLI's direct mode.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Events } from "@crm-relay/contract"
import * as Api from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"
import { Accounts, Recoveries, SubscriptionLifecycle, type Subscriptions } from "@crm-relay/events"
import { Effect, Layer, Option } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import { displayTarget } from "./DeliveriesApiLive.js"

/** Sentences of the group's errors. */
export const messages = {
  unknownRecovery: "No recovery with this id exists for this account; check the id and the account."
} as const

const iso = (date: Date) => date.toISOString()
const isoOrNull = (date: Date | null) => (date === null ? null : iso(date))

/** Where a subscription stands, from its row. */
export const stateOf = (s: Subscriptions.SubscriptionSummary): Api.SubscriptionState =>
  s.removed_at !== null ? "removed" : s.disabled_at !== null ? "disabled" : s.failing_since !== null ? "failing" : "active"

/** A subscription and its lifecycle for the operator. */
export const subscriptionStatus = (s: Subscriptions.SubscriptionSummary): Api.SubscriptionStatus => ({
  id: s.id,
  event: s.event,
  target: displayTarget(s.target_url),
  created_at: iso(s.created_at),
  state: stateOf(s),
  failing_since: isoOrNull(s.failing_since),
  disabled_at: isoOrNull(s.disabled_at),
  disabled_reason: s.disabled_reason,
  removed_at: isoOrNull(s.removed_at),
  removed_reason: s.removed_reason
})

/** A recovery and its progress for the operator. */
export const recoveryView = (r: Recoveries.Recovery): Api.RecoveryView => ({
  id: r.id,
  account_id: r.account_id,
  subscription_id: r.subscription_id,
  since: iso(r.since),
  until: iso(r.until),
  status: r.status === "pending" ? "running" : r.status,
  total: r.total,
  queued: r.queued,
  skipped: r.skipped,
  created_at: iso(r.created_at),
  finished_at: isoOrNull(r.finished_at),
  last_error: r.last_error
})

/** An unknown, removed or other account's subscription, as the APIs answer it (404). */
export const notFound = (error: SubscriptionLifecycle.SubscriptionNotFound) => new Events.NotFound({ error: error.message })

/** Why a recover was refused, as the internal API and the Integrations area answer it (404, 400, 409); nothing changed. */
export const recoverRefusals = {
  SubscriptionNotFound: notFound,
  InvalidRecoverWindow: (error: Recoveries.InvalidRecoverWindow) => new Events.BadRequest({ error: error.message }),
  SubscriptionDisabled: (error: Recoveries.SubscriptionDisabled) => new Api.SubscriptionDisabled({ error: error.message })
}

const SubscriptionLifecycleLive = HttpApiBuilder.group(InternalApi, "subscriptionLifecycle", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
    const recoveries = yield* Recoveries.Recoveries
    const known = (id: string) =>
      Effect.flatMap(accounts.find(id), (account) => (Option.isNone(account) ? unknownAccount() : Effect.succeed(account.value.id)))
    return handlers
      .handle("show", ({ path }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => lifecycle.show(accountId, path.subscriptionId)),
          Effect.flatMap(Option.match({
            onNone: () => notFound(new SubscriptionLifecycle.SubscriptionNotFound({ subscriptionId: path.subscriptionId })),
            onSome: (s) => Effect.succeed(subscriptionStatus(s))
          }))
        ))
      .handle("disable", ({ path, payload }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => lifecycle.disable(accountId, path.subscriptionId, payload.reason ?? "Disabled by the operator.")),
          Effect.map((outcome) => ({ id: path.subscriptionId, outcome })),
          Effect.catchTag("SubscriptionNotFound", notFound)
        ))
      .handle("enable", ({ path }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => lifecycle.enable(accountId, path.subscriptionId)),
          Effect.map((outcome) => ({ id: path.subscriptionId, outcome })),
          Effect.catchTag("SubscriptionNotFound", notFound)
        ))
      .handle("recover", ({ path, payload }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => recoveries.start(accountId, path.subscriptionId, payload)),
          Effect.map(recoveryView),
          Effect.catchTags(recoverRefusals)
        ))
      .handle("recovery", ({ path }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => recoveries.find(accountId, path.recoveryId)),
          Effect.flatMap(Option.match({
            onNone: () => new Events.NotFound({ error: messages.unknownRecovery }),
            onSome: (r) => Effect.succeed(recoveryView(r))
          }))
        ))
  }))

/** The lifecycle handlers (with their services; needs the database, the notifier and Accounts). */
export const layer = SubscriptionLifecycleLive.pipe(
  Layer.provide(Layer.mergeAll(SubscriptionLifecycle.SubscriptionLifecycle.Default, Recoveries.Recoveries.Default))
)
