/**
 * REST-hook subscriptions: created by any active key of an account, not
 * idempotent, `targetUrl` and `event` stored exactly as given (unknown
 * event strings match no fan-out), removed by the owning account only.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Events } from "@crm-relay/contract"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Context, Effect, Metric, Option, Schema } from "effect"
import type { AccountId } from "./Accounts.js"
import { type Page, pageOf, type UnknownCursor } from "./Page.js"

/** A subscription id (UUID), as the contract brands it. */
export const SubscriptionId = Events.SubscriptionId
export type SubscriptionId = Events.SubscriptionId

/** An active subscription, as the fan-out reads it. */
export const Subscription = Schema.Struct({
  id: SubscriptionId,
  targetUrl: Schema.String,
  event: Schema.String
}).annotations({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

/** A subscription in the operator's listing: active (possibly disabled or failing), or removed. */
export const SubscriptionSummary = Schema.Struct({
  id: SubscriptionId,
  target_url: Schema.String,
  event: Schema.String,
  /** Null for a hook added by hand in the Integrations area. */
  created_by_key_id: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromSelf,
  /** Since when every attempt failed (the auto-disable clock), if it runs. */
  failing_since: Schema.NullOr(Schema.DateFromSelf),
  disabled_at: Schema.NullOr(Schema.DateFromSelf),
  disabled_reason: Schema.NullOr(Schema.String),
  removed_at: Schema.NullOr(Schema.DateFromSelf),
  /** `unsubscribed` (DELETE /subscribe/{id} or the operator) or `gone` (the receiver answered 410). */
  removed_reason: Schema.NullOr(Schema.String)
}).annotations({ identifier: "SubscriptionSummary" })
export type SubscriptionSummary = typeof SubscriptionSummary.Type

/**
 * The condition over a `subscriptions` row (unqualified columns) that it
 * receives events of `kind`: active, not disabled, subscribed to the kind or
 * to all. The fan-out's matching, for statements that fan out themselves
 * (migration 0014's `call_outcome_facts` states the same rule in SQL).
 */
export const receiving = (sql: SqlClient.SqlClient, kind: Events.EventKind) =>
  sql`removed_at IS NULL AND disabled_at IS NULL AND event IN ${sql.in(Events.subscribedEventsFor(kind))}`

/**
 * The most active subscriptions (disabled ones included: they still take part in the fan-out
 * once enabled) an account may have; new ones past it are refused, existing ones keep working.
 */
export class SubscriptionLimit extends Context.Reference<SubscriptionLimit>()("@crm-relay/events/SubscriptionLimit", {
  defaultValue: (): number => 100
}) {}

/** Subscribes refused because the account is at its bound (metric). */
export const limitRefusals = Metric.counter("crm_relay_subscription_limit_refusals_total", {
  description: "New subscriptions (POST /subscribe or the Integrations area) refused because the account has MAX_SUBSCRIPTIONS_PER_ACCOUNT active ones.",
  incremental: true
})

/** A new subscription refused: the account already has `count` active ones, `limit` at most. */
export class TooManySubscriptions extends Schema.TaggedError<TooManySubscriptions>()("TooManySubscriptions", {
  accountId: Schema.String,
  count: Schema.Number,
  limit: Schema.Number
}) {}

/** The sentence of a `TooManySubscriptions` refusal: the limit, and how to see and remove the existing hooks. */
export const limitSentence = (refused: { readonly accountId: string; readonly count: number; readonly limit: number }): string =>
  `This account has ${refused.count} subscriptions, the most it may have is ${refused.limit}; ` +
  `see them in the Integrations area (or ask your administrator: crm-relay subscriptions list --account ${refused.accountId}) ` +
  `and remove one with DELETE /subscribe/{id} before adding another.`

/** Creates, removes and lists subscriptions. */
export class Subscriptions extends Effect.Service<Subscriptions>()("@crm-relay/events/Subscriptions", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const limit = yield* SubscriptionLimit

    const InsertRequest = Schema.Struct({
      accountId: Schema.String,
      keyId: Schema.NullOr(Schema.String),
      sessionId: Schema.NullOr(Schema.String),
      targetUrl: Schema.String,
      event: Schema.String
    })
    const insert = SqlSchema.single({
      Request: InsertRequest,
      Result: Schema.Struct({ id: SubscriptionId }),
      execute: (r) =>
        sql`INSERT INTO subscriptions (account_id, created_by_key_id, created_by_session, target_url, event)
            VALUES (${r.accountId}, ${r.keyId}, ${r.sessionId}, ${r.targetUrl}, ${r.event})
            RETURNING id`
    })
    const countActive = (accountId: string) =>
      Effect.map(
        sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM subscriptions WHERE account_id = ${accountId} AND removed_at IS NULL`,
        (rows) => rows[0]?.n ?? 0
      )
    // The account row locked first, then counted in a later statement (a later snapshot): two
    // replicas subscribing at the bound at once take turns, and the second sees the first's row.
    const insertBounded = (r: typeof InsertRequest.Type) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT id FROM accounts WHERE id = ${r.accountId} FOR UPDATE`
        const count = yield* countActive(r.accountId)
        if (count >= limit) return yield* new TooManySubscriptions({ accountId: r.accountId, count, limit })
        return yield* insert(r)
      }))
    const markRemoved = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: Schema.String, id: Schema.String }),
      Result: Schema.Struct({ id: SubscriptionId }),
      execute: ({ accountId, id }) =>
        sql`UPDATE subscriptions SET removed_at = now(), removed_reason = 'unsubscribed'
            WHERE id = ${id} AND account_id = ${accountId} AND removed_at IS NULL AND destination_id IS NULL
            RETURNING id`
    })
    const activeFor = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.String, kind: Schema.Literal("lead", "booking") }),
      Result: Subscription,
      execute: ({ accountId, kind }) =>
        sql`SELECT id, target_url AS "targetUrl", event FROM subscriptions
            WHERE account_id = ${accountId} AND ${receiving(sql, kind)}
            ORDER BY seq`
    })
    const allActive = SqlSchema.findAll({
      Request: Schema.String,
      Result: Subscription,
      execute: (accountId) =>
        sql`SELECT id, target_url AS "targetUrl", event FROM subscriptions
            WHERE account_id = ${accountId} AND removed_at IS NULL
            ORDER BY seq`
    })
    const pageOfAccount = SqlSchema.findAll({
      Request: Schema.Struct({
        accountId: Schema.String,
        after: Schema.NullOr(Schema.String),
        limit: Schema.Int,
        removed: Schema.Boolean
      }),
      Result: SubscriptionSummary,
      execute: ({ accountId, after, limit, removed }) =>
        sql`SELECT id, target_url, event, created_by_key_id, created_at,
              failing_since, disabled_at, disabled_reason, removed_at, removed_reason FROM subscriptions
            WHERE account_id = ${accountId} AND destination_id IS NULL ${removed ? sql`` : sql`AND removed_at IS NULL`}
              ${after === null ? sql`` : sql`AND seq > (SELECT seq FROM subscriptions WHERE id = ${after})`}
            ORDER BY seq LIMIT ${limit}`
    })

    return {
      /**
       * Stores a new subscription and returns its id (a repeat creates another);
       * made by an integration key (`keyId`) or, by hand, in an Integrations area session (`sessionId`).
       */
      create: Effect.fn("Subscriptions.create")(function*(input: {
        readonly accountId: AccountId
        readonly keyId: string | null
        readonly sessionId?: string | undefined
        readonly targetUrl: string
        readonly event: string
      }) {
        const row = yield* insertBounded({ ...input, sessionId: input.sessionId ?? null }).pipe(
          Effect.catchAll((e) =>
            e._tag === "TooManySubscriptions" ? Effect.zipRight(Metric.increment(limitRefusals), Effect.fail(e)) : Effect.die(e)
          )
        )
        yield* Audit.record("subscription.created", { account_id: input.accountId, subscription_id: row.id, event: input.event })
        return row.id
      }),

      /**
       * Removes the REST hook `id` of `accountId`; false when it is unknown, already removed,
       * another account's, or a destination's (removed through Destinations only).
       */
      remove: Effect.fn("Subscriptions.remove")(function*(accountId: AccountId, id: string) {
        if (!isUuid(id)) return false
        const removed = Option.isSome(yield* Effect.orDie(markRemoved({ accountId, id })))
        if (removed) yield* Audit.record("subscription.removed", { account_id: accountId, subscription_id: id })
        return removed
      }),

      /**
       * The account's active subscriptions that receive an event of `kind`
       * (`kind` or `all`), oldest first: the fan-out's targets, in its transaction.
       */
      matching: Effect.fn("Subscriptions.matching")(function*(accountId: string, kind: Events.EventKind) {
        return yield* Effect.orDie(activeFor({ accountId, kind }))
      }),

      /** The account's active subscription `id`, if it is one. */
      find: Effect.fn("Subscriptions.find")(function*(accountId: string, id: string) {
        if (!isUuid(id) || !isUuid(accountId)) return Option.none<Subscription>()
        const rows = yield* Effect.orDie(allActive(accountId))
        return Option.fromNullable(rows.find((s) => s.id === id))
      }),

      /** How many active subscriptions (disabled ones included) the account has, and the most it may have. */
      usage: Effect.fn("Subscriptions.usage")(function*(accountId: string) {
        const count = isUuid(accountId) ? yield* Effect.orDie(countActive(accountId)) : 0
        return { count, limit }
      }),

      /** The account's active subscriptions, oldest first. */
      list: Effect.fn("Subscriptions.list")(function*(accountId: AccountId) {
        return yield* Effect.orDie(allActive(accountId))
      }),

      /**
       * A page of the account's active REST hooks (with the removed ones too when `removed`),
       * oldest first (the account is not checked here); destinations are listed by Destinations.
       */
      page: Effect.fn("Subscriptions.page")(function*(
        accountId: string,
        options: {
          readonly limit?: number | undefined
          readonly cursor?: string | undefined
          readonly removed?: boolean | undefined
        }
      ) {
        const removed = options.removed === true
        return yield* pageOf(
          options,
          (after, limit) =>
            isUuid(accountId) ? Effect.orDie(pageOfAccount({ accountId, after, limit, removed })) : Effect.succeed([]),
          (cursor) =>
            isUuid(cursor) && isUuid(accountId)
              ? sql`SELECT 1 FROM subscriptions WHERE id = ${cursor} AND account_id = ${accountId}`.pipe(
                Effect.orDie,
                Effect.map((rows) => rows.length > 0)
              )
              : Effect.succeed(false)
        ) satisfies Effect.Effect<Page<SubscriptionSummary>, UnknownCursor>
      })
    }
  })
}) {}
