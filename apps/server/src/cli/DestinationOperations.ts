/**
 * What the CLI does to an account's destinations (create, list, show,
 * remove, disable, enable, test), behind one tag with two Layers chosen by
 * DataAccess: directly on the database (with the master keys: credentials
 * are sealed) or through the running server's internal API.
 */
import type { CreateDestinationRequest, DestinationView } from "@crm-relay/contract/Destinations"
import type { ToggleAnswer } from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"
import { Accounts, Destinations, Fanout, SubscriptionLifecycle } from "@crm-relay/events"
import { Migrations } from "@crm-relay/store"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { AdminError, databaseFailure, refused, unknownAccount } from "./AdminError.js"
import * as MasterKey from "../config/MasterKey.js"
import type { CliSettings } from "../config/Settings.js"
import { destinationView } from "../http/internal/DestinationsApiLive.js"
import * as BridgeLayers from "../workers/BridgeLayers.js"
import * as ConnectionsLayers from "../workers/ConnectionsLayers.js"
import * as DestinationKindsLive from "../workers/DestinationKindsLive.js"
import * as DataAccess from "./DataAccess.js"

/** Destination operations for the CLI. */
export class DestinationOperations extends Context.Tag("@crm-relay/server/DestinationOperations")<DestinationOperations, {
  readonly create: (accountId: string, request: CreateDestinationRequest) => Effect.Effect<DestinationView, AdminError>
  readonly list: (accountId: string) => Effect.Effect<ReadonlyArray<DestinationView>, AdminError>
  readonly show: (accountId: string, id: string) => Effect.Effect<DestinationView, AdminError>
  readonly remove: (accountId: string, id: string) => Effect.Effect<void, AdminError>
  readonly disable: (accountId: string, id: string, reason: Option.Option<string>) => Effect.Effect<ToggleAnswer, AdminError>
  readonly enable: (accountId: string, id: string) => Effect.Effect<ToggleAnswer, AdminError>
  readonly test: (accountId: string, id: string) => Effect.Effect<{ readonly delivery_id: string }, AdminError>
}>() {}

/** On the database of the context (migrated first), with the master keys of `settings`. */
export const layerDirect = (settings: CliSettings) =>
  Layer.unwrapEffect(
    Effect.map(MasterKey.resolve(settings).pipe(Effect.mapError((error) => refused(error.message))), (keys) =>
      Layer.effect(
        DestinationOperations,
        Effect.gen(function*() {
          const accounts = yield* Accounts.Accounts
          const destinations = yield* Destinations.Destinations
          const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
          const fanout = yield* Fanout.Fanout
          const known = (accountId: string) =>
            Effect.flatMap(accounts.find(accountId), (found) =>
              Option.isNone(found) ? Effect.fail(unknownAccount(accountId)) : Effect.succeed(found.value.id))
          const orDatabase = <A, E>(effect: Effect.Effect<A, E>) =>
            Effect.catchAllDefect(effect, (defect) => Effect.fail(databaseFailure(defect)))
          const owned = (accountId: string, id: string) =>
            Effect.flatMap(known(accountId), (account) =>
              destinations.find(account, id).pipe(Effect.mapError((e) => refused(e.message))))
          return DestinationOperations.of({
            create: (accountId, request) =>
              known(accountId).pipe(
                Effect.flatMap((account) =>
                  destinations.create({
                    accountId: account,
                    kind: request.kind,
                    name: request.name,
                    event: request.event,
                    config: request.config,
                    credentials: request.credentials === undefined
                      ? Option.none()
                      : Option.some(Redacted.make(JSON.stringify(request.credentials)))
                  }).pipe(Effect.mapError((e) => refused(e.message)))
                ),
                Effect.map(destinationView),
                orDatabase
              ),
            list: (accountId) =>
              known(accountId).pipe(Effect.flatMap(destinations.list), Effect.map((all) => all.map(destinationView)), orDatabase),
            show: (accountId, id) => owned(accountId, id).pipe(Effect.map(destinationView), orDatabase),
            remove: (accountId, id) =>
              owned(accountId, id).pipe(
                Effect.flatMap((d) => destinations.remove(d.account_id, d.id).pipe(Effect.mapError((e) => refused(e.message)))),
                orDatabase
              ),
            disable: (accountId, id, reason) =>
              owned(accountId, id).pipe(
                Effect.flatMap((d) =>
                  lifecycle.disable(d.account_id, d.subscription_id, Option.getOrElse(reason, () => "Disabled by the operator.")).pipe(
                    Effect.mapError((e) => refused(e.message))
                  )
                ),
                Effect.map((outcome) => ({ id, outcome })),
                orDatabase
              ),
            enable: (accountId, id) =>
              owned(accountId, id).pipe(
                Effect.flatMap((d) => lifecycle.enable(d.account_id, d.subscription_id).pipe(Effect.mapError((e) => refused(e.message)))),
                Effect.map((outcome) => ({ id, outcome })),
                orDatabase
              ),
            test: (accountId, id) =>
              owned(accountId, id).pipe(
                Effect.flatMap((d) => fanout.test(d.account_id, d.subscription_id)),
                Effect.flatMap(Option.match({
                  onNone: () => Effect.fail(refused("No destination of this account has this id.")),
                  onSome: (delivery) => Effect.succeed({ delivery_id: delivery })
                })),
                orDatabase
              )
          })
        })
      ).pipe(
        Layer.provide(Layer.mergeAll(
          Accounts.Accounts.Default,
          SubscriptionLifecycle.SubscriptionLifecycle.Default,
          Fanout.Fanout.Default,
          DestinationKindsLive.layer
        )),
        Layer.provide(ConnectionsLayers.layer(keys)),
        Layer.provide(BridgeLayers.Live),
        Layer.provide(Migrations.layer),
        Layer.catchAll((error) =>
          Layer.fail(
            error._tag === "VaultError"
              ? new AdminError({ message: error.message })
              : error._tag === "MigrationError"
              ? new AdminError({ message: `Migrations failed: ${error.message}` })
              : error._tag === "SqlError"
              ? new AdminError({ message: `The database failed: ${error.message}.` })
              : new AdminError({ message: `Invalid configuration: ${String(error)}` })
          )
        )
      ))
  )

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(DestinationOperations, ({ client, explain }) =>
  DestinationOperations.of({
    create: (accountId, payload) => client.destinations.create({ path: { id: accountId }, payload }).pipe(Effect.mapError(explain)),
    list: (accountId) =>
      client.destinations.list({ path: { id: accountId } }).pipe(Effect.map((page) => page.items), Effect.mapError(explain)),
    show: (accountId, id) => client.destinations.show({ path: { id: accountId, destinationId: id } }).pipe(Effect.mapError(explain)),
    remove: (accountId, id) => client.destinations.remove({ path: { id: accountId, destinationId: id } }).pipe(Effect.mapError(explain)),
    disable: (accountId, id, reason) =>
      client.destinations.disable({
        path: { id: accountId, destinationId: id },
        payload: Option.match(reason, { onNone: () => ({}), onSome: (reason) => ({ reason }) })
      }).pipe(Effect.mapError(explain)),
    enable: (accountId, id) => client.destinations.enable({ path: { id: accountId, destinationId: id } }).pipe(Effect.mapError(explain)),
    test: (accountId, id) => client.destinations.test({ path: { id: accountId, destinationId: id } }).pipe(Effect.mapError(explain))
  }))

/** Chooses how to reach the data (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<DestinationOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect(settings), remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(DestinationOperations, layerFromSettings)
