/**
 * Handlers of the operator's listings (see ListingsApi). The views are shared
 * with the CLI's direct mode, so both paths print the same thing.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Connections } from "@crm-relay/calls"
import { Events } from "@crm-relay/contract"
import { Accounts, Deliveries, IntegrationKeys, Subscriptions } from "@crm-relay/events"
import { Effect, Layer, Option } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import type { ConnectionView } from "@crm-relay/contract/InternalApi/ConnectionsApi"
import { messages as connectionMessages } from "./ConnectionsApiLive.js"
import { pageView } from "./DeliveriesApiLive.js"
import { subscriptionStatus } from "./SubscriptionLifecycleApiLive.js"
import { type AccountDetail, type AccountView, type KeyView, statusesOf, type SubscriptionView } from "@crm-relay/contract/InternalApi/ListingsApi"

/** Sentences of the listings' errors. */
export const messages = {
  unknownCursor: "cursor is not an item of this listing; pass the next_cursor of the previous page.",
  unknownSubscription: "No active subscription with this id exists for this account."
} as const

const iso = (date: Date) => date.toISOString()
const isoOrNull = (date: Date | null) => (date === null ? null : iso(date))

/** An account for the operator. */
export const accountView = (a: Accounts.AccountSummary): AccountView => ({
  id: a.id,
  name: a.name,
  mode: a.mode,
  created_at: iso(a.created_at)
})

/** An account and its counts for the operator. */
export const accountDetail = (a: Accounts.AccountDetail): AccountDetail => ({
  ...accountView(a),
  active_keys: a.active_keys,
  subscriptions: a.subscriptions,
  connections: a.connections
})

/** A key for the operator (never the key). */
export const keyView = (k: IntegrationKeys.KeySummary): KeyView => ({
  id: k.id,
  last_four: k.last_four,
  created_at: iso(k.created_at),
  last_used_at: isoOrNull(k.last_used_at),
  disabled: k.disabled_at !== null,
  disabled_at: isoOrNull(k.disabled_at)
})

/** A subscription for the operator. */
export const subscriptionView = (s: Subscriptions.SubscriptionSummary): SubscriptionView => ({
  ...subscriptionStatus(s),
  created_by_key_id: s.created_by_key_id
})

/** A connection for the operator (never the secret). */
export const connectionView = (accountId: string, c: Connections.ConnectionSummary): ConnectionView => ({
  account_id: accountId,
  tenant_id: c.tenantId,
  transport: c.transport,
  url: c.url,
  version: c.version,
  auth: c.auth.type === "api_key"
    ? { type: "api_key" }
    : {
      type: "oauth",
      token_url: c.auth.tokenUrl,
      client_id: c.auth.clientId,
      ...(c.auth.scope === undefined ? {} : { scope: c.auth.scope })
    },
  capabilities: c.capabilities,
  checked_at: iso(c.checkedAt)
})

const badCursor = () => new Events.BadRequest({ error: messages.unknownCursor })

const AccountListingLive = HttpApiBuilder.group(InternalApi, "accountListing", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const keys = yield* IntegrationKeys.IntegrationKeys
    const subscriptions = yield* Subscriptions.Subscriptions
    const known = (id: string) =>
      Effect.flatMap(accounts.find(id), (account) => (Option.isNone(account) ? unknownAccount() : Effect.succeed(account.value.id)))
    return handlers
      .handle("list", ({ urlParams }) =>
        accounts.list(urlParams).pipe(
          Effect.map((page) => ({ accounts: page.items.map(accountView), next_cursor: Option.getOrNull(page.nextCursor) })),
          Effect.catchTag("UnknownCursor", badCursor)
        ))
      .handle("show", ({ path }) =>
        Effect.flatMap(accounts.show(path.id), (found) =>
          Option.isNone(found) ? unknownAccount() : Effect.succeed(accountDetail(found.value))))
      .handle("keys", ({ path, urlParams }) =>
        keys.list(path.id, urlParams).pipe(
          Effect.map((page) => ({ keys: page.items.map(keyView), next_cursor: Option.getOrNull(page.nextCursor) })),
          Effect.catchTags({ AccountNotFound: unknownAccount, UnknownCursor: badCursor })
        ))
      .handle("subscriptions", ({ path, urlParams }) =>
        Effect.zipRight(
          known(path.id),
          subscriptions.page(path.id, { ...urlParams, removed: urlParams.removed === "true" }).pipe(
            Effect.zip(subscriptions.usage(path.id)),
            Effect.map(([page, usage]) => ({
              subscriptions: page.items.map(subscriptionView),
              next_cursor: Option.getOrNull(page.nextCursor),
              ...usage
            })),
            Effect.catchTag("UnknownCursor", badCursor)
          )
        ))
      .handle("removeSubscription", ({ path }) =>
        known(path.id).pipe(
          Effect.flatMap((accountId) => subscriptions.remove(accountId, path.subscriptionId)),
          Effect.flatMap((removed) => (removed ? Effect.void : new Events.NotFound({ error: messages.unknownSubscription })))
        ))
  }))

const ConnectionListingLive = HttpApiBuilder.group(InternalApi, "connectionListing", (handlers) =>
  Effect.gen(function*() {
    const connections = yield* Connections.Connections
    return handlers
      .handle("list", ({ path, urlParams }) =>
        connections.list(path.id, { limit: urlParams.limit ?? Deliveries.DEFAULT_PAGE, cursor: urlParams.cursor }).pipe(
          Effect.map((page) => ({
            connections: page.connections.map((c) => connectionView(path.id, c)),
            next_cursor: Option.getOrNull(page.nextCursor)
          })),
          Effect.catchTag("AccountNotFound", unknownAccount)
        ))
      .handle("remove", ({ path }) =>
        connections.remove(path.id, path.tenantId).pipe(
          Effect.catchTags({
            AccountNotFound: unknownAccount,
            ConnectionNotFound: () => new Events.NotFound({ error: connectionMessages.noConnection(path.tenantId) })
          })
        ))
  }))

const DeliverySearchLive = HttpApiBuilder.group(InternalApi, "deliverySearch", (handlers) =>
  Effect.gen(function*() {
    const deliveries = yield* Deliveries.Deliveries
    const accounts = yield* Accounts.Accounts
    return handlers.handle("search", ({ urlParams }) =>
      Effect.gen(function*() {
        if (urlParams.account !== undefined && Option.isNone(yield* accounts.find(urlParams.account))) {
          return yield* new Events.BadRequest({ error: `account: no account with id ${urlParams.account} exists.` })
        }
        const page = yield* deliveries.search({
          statuses: statusesOf(urlParams.status ?? "failed"),
          accountId: urlParams.account,
          since: urlParams.since,
          limit: urlParams.limit,
          cursor: urlParams.cursor
        }).pipe(Effect.catchTag("UnknownCursor", badCursor))
        return pageView(page)
      }))
  }))

/** The listings' handlers (need the database, Accounts, Connections and the events services). */
export const layer = Layer.mergeAll(AccountListingLive, ConnectionListingLive, DeliverySearchLive).pipe(
  Layer.provide(Layer.mergeAll(Subscriptions.Subscriptions.Default, Deliveries.Deliveries.Default))
)
