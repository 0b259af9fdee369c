/**
 * Routing: whether a call outcome is pushed to the CRM, only announced to
 * the Event API, or only stored — from the account's mode, the call's
 * classification and the account's routing rules (event-api.md: "account
 * mode, call classification and routing rules can prevent" a push).
 *
 * Rules per account (defaults when none are stored): `crm_push` turns the
 * CRM push on or off, and `classifications` lists the classifications that
 * produce anything at all (default `lead` and `booking`). `spam` never does.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Audit from "@crm-relay/store/Audit"
import { Effect, Option, Schema } from "effect"
import type { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { DEFAULT_PUSH_CLASSIFICATIONS } from "@crm-relay/contract/CallOutcome"
import { RoutingRules, RoutingRulesPatch } from "@crm-relay/contract/Calls"

/** Described in the contract, where the internal API takes it. */
export { RoutingRules, RoutingRulesPatch }

/** Classifications that never produce a push or an event, whatever the rules say. */
export const NEVER_ROUTED: ReadonlyArray<string> = ["spam"]


/** The rules of an account that never set any. */
export const DEFAULT_RULES: RoutingRules = { crm_push: true, classifications: DEFAULT_PUSH_CLASSIFICATIONS }


/** What happens to an accepted outcome. */
export type Route =
  /** A CRM push job is queued; the event follows when it ends. */
  | { readonly _tag: "Push" }
  /** No bridge traffic; the event is fanned out at once. */
  | { readonly _tag: "EventOnly"; readonly reason: string }
  /** Stored only: no push and no event. */
  | { readonly _tag: "StoreOnly"; readonly reason: string }

/** What the decision needs to know about the account. */
export interface RouteContext {
  readonly mode: "live" | "demo" | "sandbox"
  readonly rules: RoutingRules
  /** Whether the tenant has a bridge connection. */
  readonly connected: boolean
}

/** Decides the route of `outcome` (pure: the same inputs always give the same route). */
export const decide = (outcome: CallOutcome, context: RouteContext): Route => {
  const classification = outcome.classification
  if (NEVER_ROUTED.includes(classification)) {
    return { _tag: "StoreOnly", reason: `Calls classified ${classification} are stored and produce nothing.` }
  }
  if (!context.rules.classifications.includes(classification)) {
    return {
      _tag: "StoreOnly",
      reason: `The account's routing rules store calls classified ${classification} without pushing or announcing them.`
    }
  }
  if (outcome.booking?.status === "booked") {
    return { _tag: "EventOnly", reason: "The appointment was booked in-call; there is nothing more to write." }
  }
  if (context.mode !== "live") {
    return { _tag: "EventOnly", reason: `A ${context.mode} account never reaches a real CRM.` }
  }
  if (!context.rules.crm_push) {
    return { _tag: "EventOnly", reason: "The account's routing rules turn the CRM push off." }
  }
  if (!context.connected) {
    return { _tag: "EventOnly", reason: `Tenant ${outcome.tenant_id} has no bridge connection.` }
  }
  return { _tag: "Push" }
}

const RulesRow = Schema.Struct({ crm_push: Schema.Boolean, classifications: Schema.Array(Schema.String) })

/** Reads and changes routing rules. */
export class Routing extends Effect.Service<Routing>()("@crm-relay/calls/Routing", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const byAccount = SqlSchema.findOne({
      Request: Schema.String,
      Result: RulesRow,
      execute: (accountId) =>
        sql`SELECT crm_push, classifications FROM routing_rules WHERE account_id = ${accountId}`
    })
    const upsert = SqlSchema.single({
      Request: Schema.Struct({ accountId: Schema.String, crm_push: Schema.Boolean, classifications: Schema.String }),
      Result: RulesRow,
      execute: (r) =>
        sql`INSERT INTO routing_rules (account_id, crm_push, classifications)
            VALUES (${r.accountId}, ${r.crm_push}, ${r.classifications}::jsonb)
            ON CONFLICT (account_id) DO UPDATE
              SET crm_push = EXCLUDED.crm_push, classifications = EXCLUDED.classifications, updated_at = now()
            RETURNING crm_push, classifications`
    })

    /** The rules of `accountId` (the defaults when none were set). */
    const get = Effect.fn("Routing.get")(function*(accountId: string) {
      const row = yield* Effect.orDie(byAccount(accountId))
      return Option.match(row, { onNone: (): RoutingRules => DEFAULT_RULES, onSome: (r): RoutingRules => r })
    })

    return {
      get,
      /** Changes the rules of `accountId` (the account must exist); fields left out are kept. */
      set: Effect.fn("Routing.set")(function*(accountId: string, patch: RoutingRulesPatch) {
        const rules = yield* sql.withTransaction(
          Effect.gen(function*() {
            const current = yield* get(accountId)
            const classifications = [...new Set(patch.classifications ?? current.classifications)]
            return yield* upsert({
              accountId,
              crm_push: patch.crm_push ?? current.crm_push,
              classifications: JSON.stringify(classifications)
            })
          })
        ).pipe(Effect.orDie)
        yield* Audit.record("routing.set", { account_id: accountId })
        return rules
      })
    }
  })
}) {}
