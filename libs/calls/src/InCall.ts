/**
 * In-call operations: what the voice agent asks the customer's CRM while
 * the caller is on the line — contacts.search, contacts.upsert,
 * availability.list, appointments.create.
 *
 * Each is one bridge exchange (the client's `in-call` policy: no post-call
 * retry schedule; Errors rule 3), and the whole request — the connection
 * lookup (database, vault) included, not only the exchange — runs inside
 * `Schedules.inCallBudget`. Each answers a structured value the agent can act
 * on: `{ok: true, ...receipt}`, or `{ok: false, reason, message}` with
 *
 * | reason | when |
 * |---|---|
 * | `conflict` | the bridge answered 409 (slot taken, write conflict) |
 * | `unavailable` | 429, 5xx or a network failure before the budget ran out |
 * | `timeout` | no answer within the in-call budget, counted from the start of the request |
 * | `rejected` | the credential was refused (401), the answer was not a valid receipt, another 4xx or redirect, egress refused, or the input was refused before sending |
 * | `not_configured` | demo or sandbox account, no connection for the tenant, the bridge does not offer the operation, or the stored connection is unusable |
 *
 * A booking is reported only with a valid receipt that is confirmed and
 * echoes the exact requested instants (Operation rule 5, checked by the
 * client); anything else is `ok: false`. The request and answer Schemas
 * are the in-call API's, described in `@crm-relay/contract/InCall`.
 */
import {
  type AppointmentInput,
  type AvailabilityWindowInput,
  type BridgeClient,
  type BridgeError,
  BridgeClients,
  type ContactInput,
  type ContactQuery,
  Schedules
} from "@crm-relay/bridge"
import { Operations } from "@crm-relay/contract"
import { Clock, Duration, Effect, Option } from "effect"
import { AccountNotFound, Connections } from "./Connections.js"
import type {
  AppointmentAnswer,
  AvailabilityAnswer,
  ContactsSearchAnswer,
  ContactsUpsertAnswer,
  Failure,
  Reason
} from "@crm-relay/contract/InCall"

const failed = (reason: Reason, message: string): Failure => ({ ok: false, reason, message })

const budgetSpent = `The in-call time budget of ${Duration.format(Schedules.inCallBudget)} ran out before the bridge answered.`

/** The reason for a bridge failure; `elapsed` tells a budget timeout from a fast network failure. */
export const reasonOf = (error: BridgeError, elapsed: Duration.Duration): Reason => {
  switch (error._tag) {
    case "Conflict":
      return "conflict"
    case "Transient":
      return error.status === null && Duration.greaterThanOrEqualTo(elapsed, Schedules.inCallBudget) ? "timeout" : "unavailable"
    case "Auth":
    case "Permanent":
      return "rejected"
  }
}

/** One in-call exchange per call, answered as a receipt or a reason. */
export class InCall extends Effect.Service<InCall>()("@crm-relay/calls/InCall", {
  effect: Effect.gen(function*() {
    const connections = yield* Connections
    const clients = yield* BridgeClients

    /** Finds the tenant's client for `operation` and runs `call` on it within the budget. */
    const run = <A extends object>(
      operation: Operations.OperationName,
      accountId: string,
      tenantId: string,
      call: (client: BridgeClient["Type"]) => Effect.Effect<A, BridgeError>
    ): Effect.Effect<({ readonly ok: true } & A) | Failure, AccountNotFound> =>
      Effect.gen(function*() {
        const state = yield* connections.state(accountId, tenantId)
        if (Option.isNone(state)) return yield* new AccountNotFound({ accountId })
        if (state.value.mode !== "live") {
          return failed("not_configured", `Demo and sandbox accounts never reach a real CRM; this account's mode is ${state.value.mode}.`)
        }
        if (Option.isNone(state.value.connection)) {
          return failed("not_configured", `Tenant ${tenantId} has no bridge connection.`)
        }
        const stored = state.value.connection.value
        if (!stored.capabilities.operations.includes(operation)) {
          return failed("not_configured", `The tenant's bridge does not offer ${operation}.`)
        }
        const client = yield* Effect.either(clients.forConnection(stored.connection))
        if (client._tag === "Left") {
          return failed("not_configured", `The stored bridge connection is not usable (${client.left.field}): ${client.left.message}`)
        }
        const start = yield* Clock.currentTimeMillis
        return yield* call(client.right).pipe(
          Effect.map((receipt): { readonly ok: true } & A => ({ ok: true as const, ...receipt })),
          Effect.catchAll((error) =>
            Effect.map(Clock.currentTimeMillis, (now) => failed(reasonOf(error, Duration.millis(now - start)), error.message))
          )
        )
      }).pipe(
        // The budget is the whole request: a slow lookup before the exchange must not push the answer past it.
        Effect.timeoutTo({
          duration: Schedules.inCallBudget,
          onSuccess: (answer): ({ readonly ok: true } & A) | Failure => answer,
          onTimeout: () => failed("timeout", budgetSpent)
        }),
        Effect.tap((result) =>
          Effect.logDebug("In-call operation").pipe(
            Effect.annotateLogs({
              operation,
              account_id: accountId,
              tenant_id: tenantId,
              outcome: result.ok ? "ok" : result.reason
            })
          )
        ),
        Effect.withSpan(`InCall.${operation}`, { attributes: { accountId, tenantId } })
      )

    const inCall = { policy: "in-call" } as const

    return {
      /** contacts.search: `{contact: {id}}`, or `{contact: null}` when nothing matches. */
      contactsSearch: (accountId: string, tenantId: string, query: ContactQuery): Effect.Effect<ContactsSearchAnswer, AccountNotFound> =>
        run("contacts.search", accountId, tenantId, (client) => client.contactsSearch(query, inCall)),
      /** contacts.upsert: the contact's id and whether it is new. */
      contactsUpsert: (accountId: string, tenantId: string, contact: ContactInput): Effect.Effect<ContactsUpsertAnswer, AccountNotFound> =>
        run("contacts.upsert", accountId, tenantId, (client) => client.contactsUpsert(contact, inCall)),
      /** availability.list: the bridge's open slots in the window. */
      availabilityList: (
        accountId: string,
        tenantId: string,
        window: AvailabilityWindowInput
      ): Effect.Effect<AvailabilityAnswer, AccountNotFound> =>
        run("availability.list", accountId, tenantId, (client) => client.availabilityList(window, inCall)),
      /** appointments.create: reported only with a confirmed receipt of exactly the requested instants. */
      appointmentsCreate: (
        accountId: string,
        tenantId: string,
        appointment: AppointmentInput
      ): Effect.Effect<AppointmentAnswer, AccountNotFound> =>
        run("appointments.create", accountId, tenantId, (client) => client.appointmentsCreate(appointment, inCall))
    }
  })
}) {}
