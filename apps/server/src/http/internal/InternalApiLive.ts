/**
 * The internal API's handlers and its bearer-token middleware.
 */
import { HttpApiBuilder } from "@effect/platform"
import * as SqlClient from "@effect/sql/SqlClient"
import { Events } from "@crm-relay/contract"
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import { Database, Migrations } from "@crm-relay/store"
import { Effect, Layer, Option, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { AdminAuth, InternalApi, NotReady, unknownAccount } from "@crm-relay/contract/InternalApi"
import * as BackupStream from "./BackupStream.js"
import * as CallsApiLive from "./CallsApiLive.js"
import * as ConnectionsApiLive from "./ConnectionsApiLive.js"
import * as DeliveriesApiLive from "./DeliveriesApiLive.js"
import * as InCallApiLive from "./InCallApiLive.js"
import * as ListingsApiLive from "./ListingsApiLive.js"
import * as SubscriptionLifecycleApiLive from "./SubscriptionLifecycleApiLive.js"
import * as DestinationsApiLive from "./DestinationsApiLive.js"
import * as PortalSessionsApiLive from "./PortalSessionsApiLive.js"
import { PortalSessions } from "../portal/PortalSessions.js"
import { Readiness } from "../Readiness.js"

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** Sentences of the internal API's errors. */
export const messages = {
  unauthorized: "The admin token is missing or wrong.",
  notFound: "Not found: this path or method is not part of the internal API.",
  unknownKey: "No integration key with this id exists.",
  notReady: "The database does not answer.",
  starting: "The server is starting: not every listener is up yet.",
  stopping: "The server is stopping: it takes no new work."
} as const

/** Whether a given bearer token is exactly `token` (compared in constant time, as digests of equal length). */
export const tokenCheck = (token: Redacted.Redacted<string>): (given: Redacted.Redacted<string>) => boolean => {
  const expected = digest(Redacted.value(token))
  return (given) => timingSafeEqual(digest(Redacted.value(given)), expected)
}

/** Accepts exactly `token`. */
export const AdminAuthLive = (token: Redacted.Redacted<string>): Layer.Layer<AdminAuth> => {
  const matches = tokenCheck(token)
  return Layer.succeed(
    AdminAuth,
    AdminAuth.of({
      adminToken: (given) =>
        matches(given)
          ? Effect.void
          : Effect.fail(new Events.Unauthorized({ error: messages.unauthorized }))
    })
  )
}

const AccountsLive = HttpApiBuilder.group(InternalApi, "accounts", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const keys = yield* IntegrationKeys.IntegrationKeys
    return handlers
      .handle("create", ({ payload }) => accounts.create(payload))
      .handle("createKey", ({ path }) =>
        keys.create(path.id).pipe(
          Effect.map((created) => ({ id: created.id, key: Redacted.value(created.key) })),
          Effect.catchTag("AccountNotFound", unknownAccount)
        ))
  }))

const KeysLive = HttpApiBuilder.group(InternalApi, "keys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* IntegrationKeys.IntegrationKeys
    return handlers.handle("disable", ({ path }) =>
      keys.disable(path.keyId).pipe(
        Effect.catchTag("KeyNotFound", () => new Events.NotFound({ error: messages.unknownKey }))
      ))
  }))

const OperationsLive = HttpApiBuilder.group(InternalApi, "operations", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const info = yield* Database.DatabaseInfo
    return handlers
      .handle("migrate", () =>
        Migrations.run().pipe(
          Effect.map((applied) => ({ applied: applied.map(([id, name]) => ({ id, name })) })),
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.orDie
        ))
      .handle("migrationStatus", () => Migrations.status().pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie))
      .handleRaw("backup", () => BackupStream.response(sql, info))
  }))

const HealthLive = HttpApiBuilder.group(InternalApi, "health", (handlers) =>
  Effect.gen(function*() {
    const info = yield* Database.DatabaseInfo
    const sql = yield* SqlClient.SqlClient
    const readiness = yield* Readiness
    const ping = Database.ping().pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.provideService(Database.DatabaseInfo, info),
      Effect.catchAll((error) => Effect.zipRight(Effect.logWarning("Not ready", error), new NotReady({ error: messages.notReady }))),
      // A standby answers reads (a failover under way); the embedded database still answers reads on a
      // full disk, where the disk says whether it can take writes.
      Effect.flatMap((readOnly) =>
        Option.isSome(readOnly) ? Effect.succeed(readOnly) : Database.diskFull.pipe(Effect.provideService(Database.DatabaseInfo, info))
      ),
      Effect.flatMap(Option.match({
        onNone: () => Effect.succeed({ status: "ready" as const, database: info.kind }),
        onSome: (reason) => Effect.zipRight(Effect.logWarning("Not ready", reason), new NotReady({ error: reason }))
      }))
    )
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(readiness.phase, (phase) => phase === "serving" ? ping : new NotReady({ error: messages[phase] })))
  }))

/** The internal API with its handlers, guarded by `token`. */
export const layer = (token: Redacted.Redacted<string>) =>
  HttpApiBuilder.api(InternalApi).pipe(
    Layer.provide([AccountsLive, KeysLive, OperationsLive, HealthLive, CallsApiLive.layer, ConnectionsApiLive.layer, InCallApiLive.layer, DeliveriesApiLive.layer, ListingsApiLive.layer, SubscriptionLifecycleApiLive.layer, DestinationsApiLive.layer, PortalSessionsApiLive.layer.pipe(Layer.provide(PortalSessions.Default))]),
    Layer.provide(AdminAuthLive(token))
  )
