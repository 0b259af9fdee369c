/**
 * What a receiver's answers do to its subscription.
 *
 * - **Gone.** A 410 answer removes the subscription at once (Zapier's REST
 *   hook convention: the Zap is gone), `removed_reason = 'gone'`; its other
 *   pending deliveries end as `gone` (not retried, not failed). A removed
 *   subscription answers 404 on `DELETE /subscribe/{id}` like any other.
 * - **Failing, then disabled.** Failed attempts are counted per distinct
 *   delivery (a delivery's first attempt) in a one-day window. When
 *   `minFailures` deliveries failed within a day, the failure clock starts
 *   (`failing_since`, the first failure of that window); any success resets
 *   it. A failure once the clock has run for `disableAfter` disables the
 *   subscription: no new deliveries are queued for it, its pending ones end
 *   as `disabled`, and the reason and time are shown to the operator and
 *   the account. It is not deleted.
 * - **Enable** clears the disabled state and the failure clock (one
 *   action); `recover` (Recoveries) replays what ended or failed meanwhile.
 *
 * The worker's statements are plain functions over the `SqlClient` (they
 * run inside its handler); the operator's actions are the service.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Clock, Data, Duration, Effect, Option, Schema } from "effect"
import { SubscriptionSummary } from "./Subscriptions.js"
import { ORIGIN_PATTERN } from "./internal/origin.js"

/** When a failing subscription is disabled. */
export interface AutoDisablePolicy {
  /** How long every attempt must have failed (from the failure clock's start). Default 5 days. */
  readonly disableAfter: Duration.Duration
  /** Distinct deliveries that must fail within one day before the clock starts. Default 3. */
  readonly minFailures: number
}

/** 5 days, clock started by 3 failed deliveries within a day. */
export const DEFAULT_POLICY: AutoDisablePolicy = { disableAfter: Duration.days(5), minFailures: 3 }

/** The window in which `minFailures` deliveries must fail for the clock to start. */
export const FAILURE_WINDOW: Duration.Duration = Duration.days(1)

/** A subscription's state as the delivery worker reads it with each claimed delivery. */
export type ClaimedState = "active" | "failing" | "removed" | "gone" | "disabled"

/** The select-list expression of a delivery's subscription state (see `ClaimedState`). */
export const claimedStateSql = `(SELECT CASE
    WHEN s.removed_at IS NOT NULL AND s.removed_reason = 'gone' THEN 'gone'
    WHEN s.removed_at IS NOT NULL THEN 'removed'
    WHEN s.disabled_at IS NOT NULL THEN 'disabled'
    WHEN s.failing_since IS NOT NULL OR s.failure_window_count > 0 THEN 'failing'
    ELSE 'active' END
  FROM subscriptions AS s WHERE s.id = deliveries.subscription_id)`

/** Why a delivery ended without being delivered. */
export type EndReason = "gone" | "aborted" | "disabled"

/** The sentence stored as a delivery's `last_error` when it ends for `reason`. */
export const endedBecause = {
  gone: "The receiver answered 410 Gone: its subscription was removed and this delivery ended.",
  aborted: "The receiver answered with webhook-delivery: abort-message: this message ended, not retried.",
  disabled: "The subscription is disabled: this delivery ended. Enable the subscription and recover to send it."
} as const satisfies Record<EndReason, string>

/** The `disabled_reason` of an automatic disable after `policy.disableAfter`. */
export const autoDisabledReason = (policy: AutoDisablePolicy, lastError: string): string =>
  `Every attempt failed for ${Duration.format(policy.disableAfter)} (last: ${lastError})`.slice(0, 500)

const nowDate = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/**
 * Ends the pending, unleased deliveries of `subscriptionId` (but `except`)
 * for `reason`; deliveries running elsewhere finish with their own answer.
 * Returns how many ended.
 */
export const endPending = (subscriptionId: string, reason: EndReason, except: string | null) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = yield* nowDate
    // The account and the origin narrow the rows read (no index of a subscription's pending deliveries: store
    // migration 0023); every delivery of a subscription has both.
    const rows = yield* sql`UPDATE deliveries SET status = 'ended', end_reason = ${reason}, last_error = ${endedBecause[reason]}
      FROM subscriptions AS s
      WHERE s.id = ${subscriptionId} AND deliveries.account_id = s.account_id
        AND deliveries.target_origin = lower(COALESCE(substring(s.target_url FROM ${ORIGIN_PATTERN}), ''))
        AND deliveries.subscription_id = ${subscriptionId} AND deliveries.status = 'pending'
        ${except === null ? sql`` : sql`AND deliveries.id <> ${except}`}
        AND (deliveries.lease_expires_at IS NULL OR deliveries.lease_expires_at <= ${at})
      RETURNING deliveries.id`
    return rows.length
  })

/**
 * The receiver of `subscriptionId` answered 410: removes the subscription
 * (reason `gone`) and ends its other pending deliveries. Returns whether this
 * call removed it (false when it was already removed). Runs in the caller's
 * transaction; the audit line is the caller's (after commit).
 */
export const markGone = (subscriptionId: string, deliveryId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = yield* nowDate
    const removed = yield* sql<{ account_id: string }>`UPDATE subscriptions SET removed_at = ${at}, removed_reason = 'gone'
      WHERE id = ${subscriptionId} AND removed_at IS NULL RETURNING account_id`
    const ended = yield* endPending(subscriptionId, "gone", deliveryId)
    return { removed: Option.fromNullable(removed[0]?.account_id), ended }
  })

/** A success resets the failure clock of `subscriptionId`. */
export const noteSuccess = (subscriptionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`UPDATE subscriptions SET failing_since = NULL, failure_window_start = NULL, failure_window_count = 0
      WHERE id = ${subscriptionId} AND (failing_since IS NOT NULL OR failure_window_count > 0)`)

/**
 * A failed attempt of a delivery of `subscriptionId` (`newDelivery`: its first
 * attempt, so one more delivery failed): counts it, starts the failure clock
 * when `policy.minFailures` deliveries failed within a day, and disables the
 * subscription when the clock has run for `policy.disableAfter`. One
 * statement; answers whether this call disabled it.
 */
export const noteFailure = (
  subscriptionId: string,
  newDelivery: boolean,
  policy: AutoDisablePolicy,
  lastError: string,
  /** Since when the delivery's origin has been held as failing (OriginHealth), if it is: that counts as the clock too. */
  originFailingSince: Date | null = null
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const at = yield* nowDate
    const windowOpen = new Date(at.getTime() - Duration.toMillis(FAILURE_WINDOW))
    const disableFrom = new Date(at.getTime() - Duration.toMillis(policy.disableAfter))
    // SET expressions all read the row as it was: the new window is spelled out where the clock needs it.
    const reset = sql`(failure_window_start IS NULL OR failure_window_start <= ${windowOpen})`
    const start = sql`CASE WHEN ${reset} THEN ${at}::timestamptz ELSE failure_window_start END`
    const count = sql`CASE WHEN ${reset} THEN 1 ELSE failure_window_count + 1 END`
    // A retry of a delivery already counted leaves the window as it is.
    const counting = newDelivery
      ? sql`failure_window_start = ${start}, failure_window_count = ${count},
        failing_since = COALESCE(failing_since, CASE WHEN ${count} >= ${policy.minFailures}::integer THEN ${start} END),`
      : sql``
    const originDisabling = originFailingSince !== null && originFailingSince.getTime() <= disableFrom.getTime()
    const disabling = sql`((failing_since IS NOT NULL AND failing_since <= ${disableFrom}) OR ${originDisabling}::boolean)`
    const rows = yield* sql<{ disabled: boolean }>`UPDATE subscriptions SET ${counting}
        disabled_at = CASE WHEN ${disabling} THEN ${at}::timestamptz END,
        disabled_reason = CASE WHEN ${disabling} THEN ${autoDisabledReason(policy, lastError)} END
      WHERE id = ${subscriptionId} AND removed_at IS NULL AND disabled_at IS NULL
      RETURNING disabled_at IS NOT NULL AS disabled`
    return rows[0]?.disabled === true
  })

/** No subscription with this id belongs to this account (unknown, removed, or another account's). */
export class SubscriptionNotFound extends Data.TaggedError("SubscriptionNotFound")<{ readonly subscriptionId: string }> {
  override get message() {
    return `No subscription ${this.subscriptionId} exists for this account (unknown, removed, or another account's); check the id and the account.`
  }
}

/** What `enable` did. */
export type EnableOutcome = "enabled" | "already_enabled"

/** What `disable` did. */
export type DisableOutcome = "disabled" | "already_disabled"

/** Disables and enables subscriptions on the operator's or the account's request. */
export class SubscriptionLifecycle extends Effect.Service<SubscriptionLifecycle>()("@crm-relay/events/SubscriptionLifecycle", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const decodeSummaries = Schema.decodeUnknown(Schema.Array(SubscriptionSummary))

    const owned = (accountId: string, id: string) =>
      Effect.gen(function*() {
        if (!isUuid(accountId) || !isUuid(id)) return yield* new SubscriptionNotFound({ subscriptionId: id })
        const rows = yield* sql<{ disabled_at: Date | null }>`SELECT disabled_at FROM subscriptions
          WHERE id = ${id} AND account_id = ${accountId} AND removed_at IS NULL FOR UPDATE`.pipe(Effect.orDie)
        const row = rows[0]
        return row === undefined ? yield* new SubscriptionNotFound({ subscriptionId: id }) : row
      })

    return {
      /** A subscription of `accountId`, removed ones included, with its lifecycle; none when unknown or another account's. */
      show: Effect.fn("SubscriptionLifecycle.show")(function*(accountId: string, id: string) {
        if (!isUuid(accountId) || !isUuid(id)) return Option.none<SubscriptionSummary>()
        const rows = yield* sql`SELECT id, target_url, event, created_by_key_id, created_at,
            failing_since, disabled_at, disabled_reason, removed_at, removed_reason
          FROM subscriptions WHERE id = ${id} AND account_id = ${accountId}`.pipe(Effect.flatMap(decodeSummaries), Effect.orDie)
        return Option.fromNullable(rows[0])
      }),

      /**
       * Enables a disabled subscription of `accountId` and resets its failure
       * clock: new events are delivered to it again (one action).
       */
      enable: Effect.fn("SubscriptionLifecycle.enable")(function*(accountId: string, id: string) {
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* owned(accountId, id)
          if (row.disabled_at === null) return "already_enabled" as const
          yield* sql`UPDATE subscriptions SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL,
            failure_window_start = NULL, failure_window_count = 0 WHERE id = ${id}`.pipe(Effect.orDie)
          return "enabled" as const
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        if (outcome === "enabled") yield* Audit.record("subscription.enabled", { account_id: accountId, subscription_id: id })
        return outcome satisfies EnableOutcome
      }),

      /** Disables a subscription of `accountId` by hand, with `reason`; its pending deliveries end as `disabled`. */
      disable: Effect.fn("SubscriptionLifecycle.disable")(function*(accountId: string, id: string, reason: string) {
        const outcome = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* owned(accountId, id)
          if (row.disabled_at !== null) return "already_disabled" as const
          const at = yield* nowDate
          yield* sql`UPDATE subscriptions SET disabled_at = ${at}, disabled_reason = ${reason.slice(0, 500)}
            WHERE id = ${id}`.pipe(Effect.orDie)
          yield* endPending(id, "disabled", null).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
          return "disabled" as const
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        if (outcome === "disabled") {
          yield* Audit.record("subscription.disabled", { account_id: accountId, subscription_id: id, reason: reason.slice(0, 500) })
        }
        return outcome satisfies DisableOutcome
      })
    }
  })
}) {}
