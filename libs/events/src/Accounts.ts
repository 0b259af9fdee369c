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
import { Effect, Option, Schema } from "effect"
import { type Page, pageOf, UnknownCursor } from "./Page.js"
import { Account, AccountDetail, AccountMode, AccountName, AccountSummary } from "@crm-relay/contract/Accounts"

/** An account id (UUID), as the contract brands it. */
export const AccountId = EventApi.AccountId
export type AccountId = EventApi.AccountId

/** The account payloads are described in the contract, where the internal API and the Integrations area take them. */
export { Account, AccountDetail, AccountMode, AccountName, AccountSummary }

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
    const summary = SqlSchema.findOne({
      Request: Schema.String,
      Result: AccountDetail,
      // Counts as text: bigint arrives as a string on PostgreSQL and as a number on PGlite.
      execute: (id) =>
        sql`SELECT a.id, a.name, a.mode, a.created_at,
              (SELECT count(*) FROM integration_keys AS k WHERE k.account_id = a.id AND k.disabled_at IS NULL)::text AS active_keys,
              (SELECT count(*) FROM subscriptions AS s WHERE s.account_id = a.id AND s.removed_at IS NULL)::text AS subscriptions,
              (SELECT count(*) FROM connections AS c WHERE c.account_id = a.id)::text AS connections
            FROM accounts AS a WHERE a.id = ${id}`
    })
    const page = SqlSchema.findAll({
      Request: Schema.Struct({ after: Schema.NullOr(Schema.String), limit: Schema.Int }),
      Result: AccountSummary,
      execute: ({ after, limit }) =>
        sql`SELECT id, name, mode, created_at FROM accounts
            ${after === null ? sql`` : sql`WHERE seq > (SELECT seq FROM accounts WHERE id = ${after})`}
            ORDER BY seq LIMIT ${limit}`
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
      }),
      /** The account with `id`, when it was created and what it holds, if any. */
      show: Effect.fn("Accounts.show")(function*(id: string) {
        if (!isUuid(id)) return Option.none<AccountDetail>()
        return yield* Effect.orDie(summary(id))
      }),
      /** A page of accounts, oldest first, after the account `cursor` when given. */
      list: Effect.fn("Accounts.list")(function*(options: { readonly limit?: number | undefined; readonly cursor?: string | undefined }) {
        return yield* pageOf(options, (after, limit) => Effect.orDie(page({ after, limit })), (cursor) =>
          isUuid(cursor)
            ? Effect.map(Effect.orDie(byId(cursor)), Option.isSome)
            : Effect.succeed(false)) satisfies Effect.Effect<Page<AccountSummary>, UnknownCursor>
      })
    }
  })
}) {}
