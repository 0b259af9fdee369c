/**
 * What the CLI does to accounts, keys and subscriptions, behind one tag with
 * two Layers: directly on the database, or through a running server's
 * internal API (DataAccess chooses). Both validate input with the API's own
 * Schemas, so a refusal reads the same either way.
 */
import { Accounts, ErrorResponses, IntegrationKeys, KeyTags, Subscriptions } from "@crm-relay/events"
import { Database, Migrations } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Option, Redacted, Ref, Schema } from "effect"
import { AdminError, databaseFailure, refused, unknownAccount } from "./AdminError.js"
import type { AccountDetail, AccountPage, KeyPage, SubscriptionPage } from "@crm-relay/contract/InternalApi/ListingsApi"
import { accountDetail, accountView, keyView, messages as listingMessages, subscriptionView } from "../http/internal/ListingsApiLive.js"
import * as DataAccess from "./DataAccess.js"
import { CreateAccountRequest } from "@crm-relay/contract/InternalApi"
import type { CliSettings } from "../config/Settings.js"
import * as MasterKey from "../config/MasterKey.js"

/** A created key: shown once. */
export interface CreatedKey {
  readonly id: string
  readonly key: Redacted.Redacted<string>
}

/** Which page of a listing: at most `limit` items after `cursor`. */
export interface PageRequest {
  readonly limit: number
  readonly cursor: Option.Option<string>
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
    readonly listAccounts: (page: PageRequest) => Effect.Effect<AccountPage, AdminError>
    readonly showAccount: (accountId: string) => Effect.Effect<AccountDetail, AdminError>
    readonly createKey: (accountId: string) => Effect.Effect<CreatedKey, AdminError>
    readonly listKeys: (accountId: string, page: PageRequest) => Effect.Effect<KeyPage, AdminError>
    readonly disableKey: (keyId: string) => Effect.Effect<void, AdminError>
    readonly listSubscriptions: (accountId: string, page: PageRequest, removed?: boolean) => Effect.Effect<SubscriptionPage, AdminError>
    readonly removeSubscription: (accountId: string, subscriptionId: string) => Effect.Effect<void, AdminError>
    readonly migrate: Effect.Effect<ReadonlyArray<Migrations.Applied>, AdminError>
  }
>() {}

const unknownKey = (id: string) => refused(`No integration key with id ${id} exists.`)
const unknownSubscription = (id: string) => refused(`No active subscription with id ${id} exists for this account.`)
const badCursor = () => refused(`--cursor: ${listingMessages.unknownCursor}`)

const decodeCreateAccount = Schema.decodeUnknown(CreateAccountRequest)

const pageOptions = (page: PageRequest) => ({ limit: page.limit, cursor: Option.getOrUndefined(page.cursor) })
const urlParams = (page: PageRequest) => ({ limit: page.limit, ...Option.match(page.cursor, { onNone: () => ({}), onSome: (cursor) => ({ cursor }) }) })

/** Database failures of an operation as the operator's sentence. */
const orDatabase = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | AdminError> =>
  Effect.catchAllDefect(effect, (defect) => Effect.fail(databaseFailure(defect)))

/** The master keys of `settings`, for a new key only (its tag's secret is sealed in the Vault). */
const masterKeysOf = (settings: CliSettings) => MasterKey.resolve(settings).pipe(Effect.mapError((error) => refused(error.message)))

/** The keys' tags under the master keys of `settings`, resolved when a key is created: no other command needs them. */
const keyTagsOf = (settings: CliSettings) =>
  Layer.effect(
    KeyTags.KeyTags,
    Effect.map(Effect.context<SqlClient.SqlClient>(), (context) =>
      KeyTags.KeyTags.of({
        ready: masterKeysOf(settings).pipe(
          Effect.orDie,
          Effect.flatMap((keys) => Effect.flatMap(KeyTags.KeyTags, (tags) => tags.ready).pipe(Effect.provide(KeyTags.layerWith(keys)))),
          Effect.provide(context)
        )
      }))
  )

/** Operations on the database of the context (migrated before use), with the master keys of `settings` for new keys. */
export const layerDirect = (settings: CliSettings): Layer.Layer<
  AdminOperations,
  AdminError,
  SqlClient.SqlClient | Database.DatabaseInfo
> => Layer.effect(
  AdminOperations,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const info = yield* Database.DatabaseInfo
    const migrate = Migrations.run().pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.mapError(databaseFailure))
    // Commands work on a fresh database too; `migrate` then reports what this start applied.
    const appliedAtStart = yield* Ref.make(yield* migrate)
    const accounts = yield* Accounts.Accounts
    const keys = yield* IntegrationKeys.IntegrationKeys
    const subscriptions = yield* Subscriptions.Subscriptions
    const known = (accountId: string) =>
      Effect.flatMap(accounts.find(accountId), Option.match({
        onNone: () => Effect.fail(unknownAccount(accountId)),
        onSome: (account) => Effect.succeed(account.id)
      }))
    return AdminOperations.of({
      via: info.kind,
      createAccount: (input) =>
        decodeCreateAccount(input).pipe(
          Effect.mapError((error) => refused(ErrorResponses.decodeFailureSentence(error))),
          Effect.flatMap(accounts.create),
          orDatabase
        ),
      listAccounts: (page) =>
        accounts.list(pageOptions(page)).pipe(
          Effect.map((found) => ({ accounts: found.items.map(accountView), next_cursor: Option.getOrNull(found.nextCursor) })),
          Effect.catchTag("UnknownCursor", () => Effect.fail(badCursor())),
          orDatabase
        ),
      showAccount: (accountId) =>
        accounts.show(accountId).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(unknownAccount(accountId)),
            onSome: (account) => Effect.succeed(accountDetail(account))
          })),
          orDatabase
        ),
      createKey: (accountId) =>
        Effect.zipRight(masterKeysOf(settings), keys.create(accountId)).pipe(
          Effect.catchTag("AccountNotFound", () => unknownAccount(accountId)),
          orDatabase
        ),
      listKeys: (accountId, page) =>
        keys.list(accountId, pageOptions(page)).pipe(
          Effect.map((found) => ({ keys: found.items.map(keyView), next_cursor: Option.getOrNull(found.nextCursor) })),
          Effect.catchTags({ AccountNotFound: () => unknownAccount(accountId), UnknownCursor: () => Effect.fail(badCursor()) }),
          orDatabase
        ),
      disableKey: (keyId) =>
        keys.disable(keyId).pipe(
          Effect.catchTag("KeyNotFound", () => unknownKey(keyId)),
          orDatabase
        ),
      listSubscriptions: (accountId, page, removed = false) =>
        known(accountId).pipe(
          Effect.flatMap(() => Effect.zip(subscriptions.page(accountId, { ...pageOptions(page), removed }), subscriptions.usage(accountId))),
          Effect.map(([found, usage]) => ({
            subscriptions: found.items.map(subscriptionView),
            next_cursor: Option.getOrNull(found.nextCursor),
            ...usage
          })),
          Effect.catchTag("UnknownCursor", () => Effect.fail(badCursor())),
          orDatabase
        ),
      removeSubscription: (accountId, subscriptionId) =>
        known(accountId).pipe(
          Effect.flatMap((id) => subscriptions.remove(id, subscriptionId)),
          Effect.flatMap((removed) => (removed ? Effect.void : Effect.fail(unknownSubscription(subscriptionId)))),
          orDatabase
        ),
      migrate: Effect.zipWith(Ref.getAndSet(appliedAtStart, []), migrate, (before, now) => [...before, ...now])
    })
  }).pipe(
    Effect.provide(Layer.mergeAll(
      Accounts.Accounts.Default,
      IntegrationKeys.IntegrationKeys.Default.pipe(Layer.provide(keyTagsOf(settings))),
      Subscriptions.Subscriptions.Default.pipe(Layer.provide(Layer.succeed(Subscriptions.SubscriptionLimit, settings.maxSubscriptionsPerAccount)))
    ))
  )
)

/** Operations through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(AdminOperations, ({ client, explain }) =>
  AdminOperations.of({
    via: "server",
    createAccount: (input) => client.accounts.create({ payload: input }).pipe(Effect.mapError(explain)),
    listAccounts: (page) => client.accountListing.list({ urlParams: urlParams(page) }).pipe(Effect.mapError(explain)),
    showAccount: (accountId) => client.accountListing.show({ path: { id: accountId } }).pipe(Effect.mapError(explain)),
    createKey: (accountId) =>
      client.accounts.createKey({ path: { id: accountId } }).pipe(
        Effect.map((created) => ({ id: created.id, key: Redacted.make(created.key) })),
        Effect.mapError(explain)
      ),
    listKeys: (accountId, page) =>
      client.accountListing.keys({ path: { id: accountId }, urlParams: urlParams(page) }).pipe(Effect.mapError(explain)),
    disableKey: (keyId) => client.keys.disable({ path: { keyId } }).pipe(Effect.mapError(explain)),
    listSubscriptions: (accountId, page, removed = false) =>
      client.accountListing.subscriptions({
        path: { id: accountId },
        urlParams: { ...urlParams(page), ...(removed ? { removed: "true" as const } : {}) }
      }).pipe(
        Effect.mapError(explain)
      ),
    removeSubscription: (accountId, subscriptionId) =>
      client.accountListing.removeSubscription({ path: { id: accountId, subscriptionId } }).pipe(Effect.mapError(explain)),
    migrate: client.operations.migrate().pipe(
      Effect.map(({ applied }) => applied.map(({ id, name }) => [id, name] as const)),
      Effect.mapError(explain)
    )
  }))

/** Chooses how to reach the data (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<AdminOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect(settings), remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(AdminOperations, layerFromSettings)
