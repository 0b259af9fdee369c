/**
 * `crm-relay deliveries list|replay`: an account's webhook deliveries,
 * latest first (status, attempts, last error, next attempt), and replaying
 * one (queued again with the same webhook-id).
 */
import { Command, Options } from "@effect/cli"
import * as Deliveries from "@crm-relay/events/DeliveryPages"
import { type Context, Effect, Option } from "effect"
import type { DeliveryView } from "../api/DeliveriesApi.js"
import type * as Operations from "./DeliveryOperations.js"
import { json, print } from "./Output.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withDeliveries = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.DeliveryOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./DeliveryOperations.js")), (operations) => operations.withOperations(f))

/** One delivery as text: a headline, the target, and what went wrong last. */
export const describeDelivery = (d: DeliveryView): string => {
  const last = d.last_attempt === null
    ? "no attempt yet"
    : `last attempt ${d.last_attempt.at}: ${d.last_attempt.status_code ?? d.last_attempt.error_class ?? "?"}`
  const next = d.next_attempt_at === null ? "" : `  next attempt ${d.next_attempt_at}`
  return [
    `${d.id}  ${d.event} call ${d.call_id}  ${d.status}  attempts ${d.attempts}${next}`,
    `    ${d.target}  (${last})`,
    ...(d.last_error === null ? [] : [`    last error: ${d.last_error}`])
  ].join("\n")
}

const list = Command.make(
  "list",
  {
    account: Options.text("account").pipe(Options.withDescription("Id of the account whose deliveries to list.")),
    limit: Options.integer("limit").pipe(
      Options.withDefault(Deliveries.DEFAULT_PAGE),
      Options.withDescription(`At most this many (1 to ${Deliveries.MAX_PAGE}).`)
    ),
    cursor: Options.text("cursor").pipe(
      Options.optional,
      Options.withDescription("Continue after this delivery (the next_cursor of the previous page).")
    ),
    json
  },
  ({ account, cursor, json, limit }) =>
    withDeliveries((operations) =>
      Effect.flatMap(operations.list(account, { limit: Math.min(Math.max(limit, 1), Deliveries.MAX_PAGE), cursor }), (page) =>
        print(
          json,
          page,
          [
            page.deliveries.length === 0 ? "No deliveries." : page.deliveries.map(describeDelivery).join("\n"),
            ...Option.match(Option.fromNullable(page.next_cursor), {
              onNone: () => [],
              onSome: (next) => [`More: crm-relay deliveries list --account ${account} --cursor ${next}`]
            })
          ].join("\n")
        ))
    )
).pipe(Command.withDescription("List an account's webhook deliveries, latest first, with status, attempts, last error and next attempt."))

const replay = Command.make(
  "replay",
  { id: Options.text("id").pipe(Options.withDescription("Id of the delivery to send again.")), json },
  ({ id, json }) =>
    withDeliveries((operations) =>
      Effect.flatMap(operations.replay(id), (outcome) =>
        print(
          json,
          { id, outcome },
          outcome === "queued"
            ? `Queued delivery ${id} again (same webhook-id); it is due now.`
            : `Delivery ${id} is already pending; left as it is.`
        ))
    )
).pipe(Command.withDescription("Send a delivered or failed webhook delivery again, with the same webhook-id."))

/** `crm-relay deliveries`. */
export const command = Command.make("deliveries").pipe(
  Command.withDescription("Watch and replay webhook deliveries."),
  Command.withSubcommands([list, replay])
)
