/**
 * What the CLI does to a subscription's lifecycle (show, disable, enable,
 * recover, a recovery's progress), behind one tag with two Layers chosen by
 * DataAccess: directly on the database, or through the running server's
 * internal API (the same operations the Integrations area calls).
 */
import type * as Api from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"
import { Accounts, Recoveries, SubscriptionLifecycle } from "@crm-relay/events"
import { Migrations } from "@crm-relay/store"
import { Context, Effect, Layer, Option } from "effect"
import { type AdminError, databaseFailure, refused, unknownAccount } from "./AdminError.js"
import { messages, recoveryView, subscriptionStatus } from "../http/internal/SubscriptionLifecycleApiLive.js"
import type { CliSettings } from "../config/Settings.js"
import * as DataAccess from "./DataAccess.js"

/** Subscription lifecycle operations for the CLI. */
export class SubscriptionOperations extends Context.Tag("@crm-relay/server/SubscriptionOperations")<SubscriptionOperations, {
  readonly show: (accountId: string, id: string) => Effect.Effect<Api.SubscriptionStatus, AdminError>
  readonly disable: (accountId: string, id: string, reason: Option.Option<string>) => Effect.Effect<Api.ToggleAnswer, AdminError>
  readonly enable: (accountId: string, id: string) => Effect.Effect<Api.ToggleAnswer, AdminError>
  readonly recover: (accountId: string, id: string, window: Api.RecoverRequest) => Effect.Effect<Api.RecoveryView, AdminError>
  readonly recovery: (accountId: string, id: string) => Effect.Effect<Api.RecoveryView, AdminError>
}>() {}

const unknownRecovery = () => refused(messages.unknownRecovery)

/** On the database of the context (migrated first). */
export const layerDirect = Layer.effect(
  SubscriptionOperations,
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
    const recoveries = yield* Recoveries.Recoveries
    const known = (accountId: string) =>
      Effect.flatMap(accounts.find(accountId), (found) => (Option.isNone(found) ? unknownAccount(accountId) : Effect.succeed(found.value.id)))
    const orDatabase = <A, E>(effect: Effect.Effect<A, E>) => Effect.catchAllDefect(effect, (defect) => Effect.fail(databaseFailure(defect)))
    const notFound = (error: SubscriptionLifecycle.SubscriptionNotFound) => refused(error.message)
    return SubscriptionOperations.of({
      show: (accountId, id) =>
        known(accountId).pipe(
          Effect.flatMap((account) => lifecycle.show(account, id)),
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(notFound(new SubscriptionLifecycle.SubscriptionNotFound({ subscriptionId: id }))),
            onSome: (s) => Effect.succeed(subscriptionStatus(s))
          })),
          orDatabase
        ),
      disable: (accountId, id, reason) =>
        known(accountId).pipe(
          Effect.flatMap((account) => lifecycle.disable(account, id, Option.getOrElse(reason, () => "Disabled by the operator."))),
          Effect.map((outcome) => ({ id, outcome })),
          Effect.catchTag("SubscriptionNotFound", (e) => Effect.fail(notFound(e))),
          orDatabase
        ),
      enable: (accountId, id) =>
        known(accountId).pipe(
          Effect.flatMap((account) => lifecycle.enable(account, id)),
          Effect.map((outcome) => ({ id, outcome })),
          Effect.catchTag("SubscriptionNotFound", (e) => Effect.fail(notFound(e))),
          orDatabase
        ),
      recover: (accountId, id, window) =>
        known(accountId).pipe(
          Effect.flatMap((account) => recoveries.start(account, id, window)),
          Effect.map(recoveryView),
          Effect.catchTags({
            SubscriptionNotFound: (e) => Effect.fail(notFound(e)),
            InvalidRecoverWindow: (e) => Effect.fail(refused(e.message)),
            SubscriptionDisabled: (e) => Effect.fail(refused(e.message))
          }),
          orDatabase
        ),
      recovery: (accountId, id) =>
        known(accountId).pipe(
          Effect.flatMap((account) => recoveries.find(account, id)),
          Effect.flatMap(Option.match({ onNone: () => Effect.fail(unknownRecovery()), onSome: (r) => Effect.succeed(recoveryView(r)) })),
          orDatabase
        )
    })
  })
).pipe(
  Layer.provide(Layer.mergeAll(
    Accounts.Accounts.Default,
    SubscriptionLifecycle.SubscriptionLifecycle.Default,
    Recoveries.Recoveries.Default
  )),
  Layer.provide(Migrations.layer)
)

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(SubscriptionOperations, ({ client, explain }) =>
  SubscriptionOperations.of({
    show: (accountId, id) =>
      client.subscriptionLifecycle.show({ path: { id: accountId, subscriptionId: id } }).pipe(Effect.mapError(explain)),
    disable: (accountId, id, reason) =>
      client.subscriptionLifecycle.disable({
        path: { id: accountId, subscriptionId: id },
        payload: Option.match(reason, { onNone: () => ({}), onSome: (reason) => ({ reason }) })
      }).pipe(Effect.mapError(explain)),
    enable: (accountId, id) =>
      client.subscriptionLifecycle.enable({ path: { id: accountId, subscriptionId: id } }).pipe(Effect.mapError(explain)),
    recover: (accountId, id, window) =>
      client.subscriptionLifecycle.recover({ path: { id: accountId, subscriptionId: id }, payload: window }).pipe(
        Effect.mapError(explain)
      ),
    recovery: (accountId, id) =>
      client.subscriptionLifecycle.recovery({ path: { id: accountId, recoveryId: id } }).pipe(Effect.mapError(explain))
  }))

/** Chooses how to reach the data (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<SubscriptionOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect, remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(SubscriptionOperations, layerFromSettings)
