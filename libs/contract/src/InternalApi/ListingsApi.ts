/**
 * The operator's listings on the internal API: every object can be listed,
 * a page at a time. A page is `limit` items (1..200, default 50) in a stable
 * order, with `next_cursor` when more follow: pass it as `cursor` for the
 * next page. Secrets are never listed: keys show their last four
 * characters, connections their credential kind.
 *
 * - `GET /v1/accounts` → `{accounts, next_cursor}`, oldest first.
 * - `GET /v1/accounts/{id}` → the account with its active keys, active
 *   subscriptions and connections counted.
 * - `GET /v1/accounts/{id}/keys` → `{keys, next_cursor}`: id, last four
 *   characters, created, last used (to the minute), disabled.
 * - `GET /v1/accounts/{id}/subscriptions` → `{subscriptions, next_cursor}`,
 *   the active ones (each with its state: active, failing or disabled, when
 *   and why), oldest first, and the removed ones too with `removed=true`; `DELETE /v1/accounts/{id}/subscriptions/{subscriptionId}` → 204.
 * - `GET /v1/accounts/{id}/connections` → `{connections, next_cursor}` by
 *   tenant id; `DELETE /v1/accounts/{id}/connections/{tenantId}` → 204
 *   (the connection and its sealed secret are deleted).
 * - `GET /v1/deliveries?status=failed,pending&account=ID&since=ISO` →
 *   `{deliveries, next_cursor}` across all accounts (or one), latest first;
 *   `status` defaults to `failed`.
 *
 * Unknown account → 404; a cursor that is not an item of the listing, or a
 * bad parameter → 400. The groups get the admin-token middleware where
 * InternalApi adds them.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import * as Accounts from "../Accounts.js"
import * as Deliveries from "../Deliveries.js"
import * as Events from "../Events.js"
import { SubscriptionStatus } from "./SubscriptionLifecycleApi.js"
import { Schema } from "effect"
import { ConnectionView } from "./ConnectionsApi.js"
import { DeliveryPage, ListParams } from "./DeliveriesApi.js"

const accountPath = Schema.Struct({ id: Schema.String })
const nextCursor = Schema.NullOr(Schema.String)

/** An account in a listing. */
export const AccountView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  mode: Accounts.AccountMode,
  created_at: Schema.String
}).annotations({ identifier: "AccountView" })
export type AccountView = typeof AccountView.Type

/** GET /v1/accounts/{id}: the account and what it holds. */
export const AccountDetail = Schema.Struct({
  ...AccountView.fields,
  active_keys: Schema.Int,
  subscriptions: Schema.Int,
  connections: Schema.Int
}).annotations({ identifier: "AccountDetail" })
export type AccountDetail = typeof AccountDetail.Type

/** An integration key in a listing: never the key. */
export const KeyView = Schema.Struct({
  id: Schema.String,
  /** The key's last four characters (null for keys older than this listing). */
  last_four: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  /** The latest authenticated request, to the minute; null when never used. */
  last_used_at: Schema.NullOr(Schema.String),
  disabled: Schema.Boolean,
  disabled_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "KeyView" })
export type KeyView = typeof KeyView.Type

/** A subscription in a listing, with where it stands (active, failing, disabled or removed). */
export const SubscriptionView = Schema.Struct({
  ...SubscriptionStatus.fields,
  /** Null for a hook added by hand in the Integrations area. */
  created_by_key_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "SubscriptionView" })
export type SubscriptionView = typeof SubscriptionView.Type

/** Query of the subscriptions listing: `removed=true` lists removed ones too (when and why, e.g. `gone`). */
export const SubscriptionListParams = Schema.Struct({
  ...ListParams.fields,
  removed: Schema.optionalWith(
    Schema.Literal("true", "false").annotations({ message: () => "removed must be true or false" }),
    { exact: true }
  )
})

/** Pages of each listing. */
export const AccountPage = Schema.Struct({ accounts: Schema.Array(AccountView), next_cursor: nextCursor })
  .annotations({ identifier: "AccountPage" })
export type AccountPage = typeof AccountPage.Type
export const KeyPage = Schema.Struct({ keys: Schema.Array(KeyView), next_cursor: nextCursor })
  .annotations({ identifier: "KeyPage" })
export type KeyPage = typeof KeyPage.Type
/** A page of an account's subscriptions, with `count` of `limit`: its active ones (disabled included) and the most it may have. */
export const SubscriptionPage = Schema.Struct({
  subscriptions: Schema.Array(SubscriptionView),
  next_cursor: nextCursor,
  count: Schema.Int,
  limit: Schema.Int
})
  .annotations({ identifier: "SubscriptionPage" })
export type SubscriptionPage = typeof SubscriptionPage.Type
export const ConnectionPage = Schema.Struct({ connections: Schema.Array(ConnectionView), next_cursor: nextCursor })
  .annotations({ identifier: "ConnectionPage" })
export type ConnectionPage = typeof ConnectionPage.Type

/** Comma-separated delivery statuses, as `status` of GET /v1/deliveries and `--status` take them. */
export const DeliveryStatuses = Schema.String.pipe(
  Schema.pattern(/^(pending|delivered|failed|ended)(,(pending|delivered|failed|ended))*$/, {
    message: () => "status must be pending, delivered, failed or ended (comma-separated)"
  })
)

/** Query of GET /v1/deliveries. */
export const DeliverySearchParams = Schema.Struct({
  ...ListParams.fields,
  status: Schema.optionalWith(DeliveryStatuses, { exact: true }),
  account: Schema.optionalWith(Schema.String, { exact: true }),
  since: Schema.optionalWith(
    Schema.Date.annotations({ message: () => "since must be a date and time, e.g. 2026-01-31T12:00:00Z" }),
    { exact: true }
  )
})

/** The statuses of a `status` parameter. */
export const statusesOf = (text: string): ReadonlyArray<Deliveries.DeliveryStatus> =>
  text.split(",").filter((s): s is Deliveries.DeliveryStatus =>
    s === "pending" || s === "delivered" || s === "failed" || s === "ended"
  )

/** Accounts, their keys and subscriptions. */
export class AccountListingGroup extends HttpApiGroup.make("accountListing")
  .add(
    HttpApiEndpoint.get("list", "/v1/accounts")
      .annotate(OpenApi.Summary, "List accounts")
      .setUrlParams(ListParams)
      .addSuccess(AccountPage)
      .addError(Events.BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.get("show", "/v1/accounts/:id")
      .annotate(OpenApi.Summary, "Get an account")
      .setPath(accountPath)
      .addSuccess(AccountDetail)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("keys", "/v1/accounts/:id/keys")
      .annotate(OpenApi.Summary, "List an account's integration keys")
      .setPath(accountPath)
      .setUrlParams(ListParams)
      .addSuccess(KeyPage)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("subscriptions", "/v1/accounts/:id/subscriptions")
      .annotate(OpenApi.Summary, "List an account's subscriptions")
      .setPath(accountPath)
      .setUrlParams(SubscriptionListParams)
      .addSuccess(SubscriptionPage)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.del("removeSubscription", "/v1/accounts/:id/subscriptions/:subscriptionId")
      .annotate(OpenApi.Summary, "Remove a subscription")
      .setPath(Schema.Struct({ id: Schema.String, subscriptionId: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "Accounts, their integration keys and subscriptions.")
{}

/** Bridge connections of an account. */
export class ConnectionListingGroup extends HttpApiGroup.make("connectionListing")
  .add(
    HttpApiEndpoint.get("list", "/v1/accounts/:id/connections")
      .annotate(OpenApi.Summary, "List an account's bridge connections")
      .setPath(accountPath)
      .setUrlParams(ListParams)
      .addSuccess(ConnectionPage)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/accounts/:id/connections/:tenantId")
      .annotate(OpenApi.Summary, "Remove a tenant's bridge connection")
      .setPath(Schema.Struct({ id: Schema.String, tenantId: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "An account's bridge connections.")
{}

/** Deliveries across accounts, by status. */
export class DeliverySearchGroup extends HttpApiGroup.make("deliverySearch")
  .add(
    HttpApiEndpoint.get("search", "/v1/deliveries")
      .annotate(OpenApi.Summary, "Search webhook deliveries")
      .setUrlParams(DeliverySearchParams)
      .addSuccess(DeliveryPage)
      .addError(Events.BadRequest.wire)
  )
  .annotate(OpenApi.Description, "Webhook deliveries across accounts.")
{}
