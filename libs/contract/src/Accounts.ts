/**
 * Accounts and integration keys as the internal API and the Integrations
 * area show them: the tenant an integration key, a subscription and a
 * delivery belong to. `mode` decides whether calls may reach a real CRM
 * (`demo`/`sandbox` never do).
 */
import { Schema } from "effect"
import { AccountId } from "./EventApi.js"

/** How an account's calls are handled: `live`, or `demo`/`sandbox` (never a real CRM). */
export const AccountMode = Schema.Literal("live", "demo", "sandbox").annotations({ identifier: "AccountMode" })
export type AccountMode = typeof AccountMode.Type

/** An account's display name: 1 to 200 characters, trimmed. */
export const AccountName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(200, { message: () => "name must be at most 200 characters" })
)

/** An account as stored. */
export const Account = Schema.Struct({ id: AccountId, name: Schema.String, mode: AccountMode }).annotations({
  identifier: "Account"
})
export type Account = typeof Account.Type

/** An account in the operator's listing. */
export const AccountSummary = Schema.Struct({
  id: AccountId,
  name: Schema.String,
  mode: AccountMode,
  created_at: Schema.DateFromSelf
}).annotations({ identifier: "AccountSummary" })
export type AccountSummary = typeof AccountSummary.Type

/** An account and what it holds, counted. */
export const AccountDetail = Schema.Struct({
  ...AccountSummary.fields,
  active_keys: Schema.NumberFromString.pipe(Schema.int()),
  subscriptions: Schema.NumberFromString.pipe(Schema.int()),
  connections: Schema.NumberFromString.pipe(Schema.int())
}).annotations({ identifier: "AccountDetail" })
export type AccountDetail = typeof AccountDetail.Type

/** An integration key's id (UUID): safe to show and log, unlike the key. */
export const IntegrationKeyId = Schema.UUID.pipe(Schema.brand("IntegrationKeyId")).annotations({
  identifier: "IntegrationKeyId"
})
export type IntegrationKeyId = typeof IntegrationKeyId.Type
