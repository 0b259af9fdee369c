/**
 * What the CLI does to accounts and keys, behind one tag with two Layers:
 * directly on the database, or through a running server's internal API
 * (DataAccess chooses).
 */
import type { Events } from "@crm-relay/contract"
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import { Database, Migrations } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Redacted, Ref } from "effect"
import { AdminError, databaseFailure, unknownAccount } from "./AdminError.js"
import * as DataAccess from "./cli/DataAccess.js"
import type { CliSettings } from "./Settings.js"

/** A created key: shown once. */
export interface CreatedKey {
  readonly id: string
  readonly key: Redacted.Redacted<string>
}

/** Account and key administration. */
export class AdminOperations extends Context.Tag("@crm-relay/server/AdminOperations")<
  AdminOperations,
  {
    /** How the operations reach the data: a running server, or the database itself. */
    readonly via: "server" | "postgres" | "pglite"
    readonly createAccount: (input: {
      readonly name: string
      readonly mode: Accounts.AccountMode
    }) => Effect.Effect<Accounts.Account, AdminError>
    readonly createKey: (accountId: string) => Effect.Effect<CreatedKey, AdminError>
    readonly disableKey: (keyId: string) => Effect.Effect<void, AdminError>
    readonly migrate: Effect.Effect<ReadonlyArray<Migrations.Applied>, AdminError>
  }
>() {}

const unknownKey = (id: string) => new AdminError({ message: `No integration key with id ${id} exists.` })

/** Operations on the database of the context (migrated before use). */
export const layerDirect: Layer.Layer<
  AdminOperations,
  AdminError,
  SqlClient.SqlClient | Database.DatabaseInfo
> = Layer.effect(
  AdminOperations,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const info = yield* Database.DatabaseInfo
    const migrate = Migrations.run().pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.mapError(databaseFailure))
    // Commands work on a fresh database too; `migrate` then reports what this start applied.
    const appliedAtStart = yield* Ref.make(yield* migrate)
    const accounts = yield* Accounts.Accounts
    const keys = yield* IntegrationKeys.IntegrationKeys
    return AdminOperations.of({
      via: info.kind,
      createAccount: (input) =>
        accounts.create(input).pipe(
          Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))
        ),
      createKey: (accountId) =>
        keys.create(accountId).pipe(
          Effect.catchTag("AccountNotFound", () => unknownAccount(accountId)),
          Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))
        ),
      disableKey: (keyId) =>
        keys.disable(keyId).pipe(
          Effect.catchTag("KeyNotFound", () => unknownKey(keyId)),
          Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))
        ),
      migrate: Effect.zipWith(Ref.getAndSet(appliedAtStart, []), migrate, (before, now) => [...before, ...now])
    })
  }).pipe(Effect.provide(Layer.merge(Accounts.Accounts.Default, IntegrationKeys.IntegrationKeys.Default)))
)

/** Operations through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(AdminOperations, ({ baseUrl, client, failed }) => {
  const fail = (error: { readonly _tag: string }): AdminError => {
    switch (error._tag) {
      case "NotFound":
      case "BadRequest":
        return new AdminError({ message: (error as Events.NotFound).error })
      case "Unauthorized":
      case "RequestError":
      case "ResponseError":
        return failed(error)
      default:
        return new AdminError({ message: `The running server at ${baseUrl} answered unexpectedly.` })
    }
  }
  return AdminOperations.of({
    via: "server",
    createAccount: (input) => client.accounts.create({ payload: input }).pipe(Effect.mapError(fail)),
    createKey: (accountId) =>
      client.accounts.createKey({ path: { id: accountId } }).pipe(
        Effect.map((created) => ({ id: created.id, key: Redacted.make(created.key) })),
        Effect.mapError(fail)
      ),
    disableKey: (keyId) => client.keys.disable({ path: { keyId } }).pipe(Effect.mapError(fail)),
    migrate: client.operations.migrate().pipe(
      Effect.map(({ applied }) => applied.map(({ id, name }) => [id, name] as const)),
      Effect.mapError(fail)
    )
  })
})

/** Chooses how to reach the data (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<AdminOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect, remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(AdminOperations, layerFromSettings)
