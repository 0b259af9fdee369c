/**
 * Accounts: the tenant an integration key, a subscription and a delivery
 * belong to. `mode` decides whether calls may reach a real CRM
 * (`demo`/`sandbox` never do).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { EventApi } from "@crm-relay/contract"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Effect, Schema } from "effect"

/** An account id (UUID), as the contract brands it. */
export const AccountId = EventApi.AccountId
export type AccountId = EventApi.AccountId

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

/** Creates and reads accounts. */
export class Accounts extends Effect.Service<Accounts>()("@crm-relay/events/Accounts", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.single({
      Request: Schema.Struct({ name: Schema.String, mode: AccountMode }),
      Result: Account,
      execute: ({ mode, name }) => sql`INSERT INTO accounts (name, mode) VALUES (${name}, ${mode}) RETURNING id, name, mode`
    })
    const byId = SqlSchema.findOne({
      Request: Schema.String,
      Result: Account,
      execute: (id) => sql`SELECT id, name, mode FROM accounts WHERE id = ${id}`
    })

    return {
      /** Creates an account. */
      create: Effect.fn("Accounts.create")(function*(input: { readonly name: string; readonly mode: AccountMode }) {
        const account = yield* Effect.orDie(insert(input))
        yield* Audit.record("account.created", { account_id: account.id, mode: account.mode })
        return account
      }),
      /** The account with `id`, if any (any string; a non-UUID finds nothing). */
      find: Effect.fn("Accounts.find")(function*(id: string) {
        if (!isUuid(id)) return yield* Effect.succeedNone
        return yield* Effect.orDie(byId(id))
      })
    }
  })
}) {}
