/**
 * `crm-relay deliveries list|replay`: webhook deliveries, latest first
 * (status, attempts, last error, next attempt) — one account's, or those in
 * some statuses across all accounts — and replaying one, or every delivery
 * in some statuses (queued again with the same webhook-id), with progress.
 */
import { Command, Options } from "@effect/cli"
import { type Context, Effect, Option } from "effect"
import { refused } from "./AdminError.js"
import { heldSentence } from "@crm-relay/contract/Deliveries"
import type { DeliveryView } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import type * as Operations from "./DeliveryOperations.js"
import type { SearchFilter } from "./DeliveryOperations.js"
import * as Flags from "./Flags.js"
import { json, print } from "./Output.js"
import * as Progress from "./Progress.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withDeliveries = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.DeliveryOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./DeliveryOperations.js")), (operations) => operations.withOperations(f))

const STATUSES = ["pending", "delivered", "failed"] as const

/** One delivery as text: a headline, the target, and what went wrong last. */
export const describeDelivery = (d: DeliveryView): string => {
  const last = d.last_attempt === null
    ? "no attempt yet"
    : `last attempt ${d.last_attempt.at}: ${d.last_attempt.status_code ?? d.last_attempt.error_class ?? "?"}`
  const next = d.held !== null || d.next_attempt_at === null ? "" : `  next attempt ${d.next_attempt_at}`
  return [
    `${d.id}  ${d.event} call ${d.call_id}  ${d.status}  attempts ${d.attempts}${next}`,
    `    ${d.target}  (${last})`,
    ...(d.held === null ? [] : [`    ${heldSentence(d.held)}`]),
    ...(d.last_error === null ? [] : [`    last error: ${d.last_error}`])
  ].join("\n")
}

const account = Options.text("account").pipe(Options.optional, Options.withDescription("Only this account's deliveries."))

const since = Options.text("since").pipe(
  Options.optional,
  Options.withDescription("Only deliveries created at or after this time (ISO 8601, e.g. 2026-01-31T12:00:00Z).")
)

const parseSince = (given: Option.Option<string>) =>
  Option.match(given, {
    onNone: () => Effect.succeed(Option.none<Date>()),
    onSome: (text) => {
      const at = new Date(text)
      return Number.isNaN(at.getTime())
        ? Effect.fail(refused(`--since: ${JSON.stringify(text)} is not a date and time; use ISO 8601, e.g. 2026-01-31T12:00:00Z.`))
        : Effect.succeed(Option.some(at))
    }
  })

const list = Command.make(
  "list",
  {
    account,
    status: Flags.status(STATUSES, "Which deliveries to list (default: every status of --account; failed across all accounts)."),
    limit: Flags.limit,
    cursor: Flags.cursor,
    json
  },
  ({ account, json, status, ...flags }) =>
    withDeliveries((operations) =>
      Effect.gen(function*() {
        const page = Flags.pageRequest(flags)
        // One account's deliveries in every status is the original listing; anything else searches by status.
        const found = Option.isSome(account) && status.length === 0
          ? yield* operations.list(account.value, { limit: page.limit, cursor: page.cursor })
          : yield* operations.search({
            statuses: yield* Flags.statuses(status, STATUSES, ["failed"]),
            accountId: account,
            since: Option.none()
          }, page)
        const again = ["crm-relay deliveries list", ...Option.toArray(Option.map(account, (id) => `--account ${id}`)), ...status.map((s) => `--status ${s}`)]
        yield* print(
          json,
          found,
          [
            found.deliveries.length === 0 ? "No deliveries." : found.deliveries.map(describeDelivery).join("\n"),
            ...Flags.moreLine(found.next_cursor, again.join(" "))
          ].join("\n")
        )
      })
    )
).pipe(
  Command.withDescription(
    "List webhook deliveries, latest first, with status, attempts, last error and next attempt: one account's (--account), " +
      "or those in --status across all accounts."
  )
)

/** Every delivery the filter finds, page by page (ids first, so replays do not shift the pages). */
const everyId = (operations: Context.Tag.Service<typeof Operations.DeliveryOperations>, filter: SearchFilter) =>
  Effect.suspend(() =>
    Effect.iterate({ ids: [] as ReadonlyArray<string>, cursor: Option.none<string>(), done: false }, {
      while: (state) => !state.done,
      body: (state) =>
        Effect.map(operations.search(filter, { limit: 200, cursor: state.cursor }), (page) => ({
          ids: [...state.ids, ...page.deliveries.map((d) => d.id)],
          cursor: Option.fromNullable(page.next_cursor),
          done: page.next_cursor === null
        }))
    }).pipe(Effect.map((state) => state.ids)))

const replay = Command.make(
  "replay",
  {
    id: Options.text("id").pipe(Options.optional, Options.withDescription("Id of the delivery to send again.")),
    status: Flags.status(["delivered", "failed"], "Replay every delivery in these statuses instead of one --id."),
    account,
    since,
    json
  },
  ({ account, id, json, since, status }) =>
    withDeliveries((operations) =>
      Effect.gen(function*() {
        if (Option.isSome(id)) {
          if (status.length > 0 || Option.isSome(account) || Option.isSome(since)) {
            return yield* refused("Give either --id, or --status with --account and --since, not both.")
          }
          const outcome = yield* operations.replay(id.value).pipe(
            Effect.catchTag("NotReplayable", (error) => Effect.fail(refused(error.message)))
          )
          return yield* print(
            json,
            { id: id.value, outcome },
            outcome === "queued"
              ? `Queued delivery ${id.value} again (same webhook-id); it is due now.`
              : `Delivery ${id.value} is already pending; left as it is.`
          )
        }
        if (status.length === 0) return yield* refused("Give --id of one delivery, or --status (e.g. --status failed) to replay many.")
        const filter: SearchFilter = {
          statuses: yield* Flags.statuses(status, ["delivered", "failed"] as const, ["failed"]),
          accountId: account,
          since: yield* parseSince(since)
        }
        const ids = yield* everyId(operations, filter)
        const mode = Progress.mode(json)
        let queued = 0
        let pending = 0
        // A delivery of a removed or disabled subscription would be ended again unsent: counted, not queued.
        let unsendable = 0
        for (const [index, delivery] of ids.entries()) {
          const outcome = yield* operations.replay(delivery).pipe(
            Effect.catchTag("NotReplayable", () => Effect.succeed("not_replayable" as const))
          )
          if (outcome === "queued") queued++
          else if (outcome === "already_pending") pending++
          else unsendable++
          yield* Progress.report(mode, "Replaying deliveries", index + 1, ids.length)
        }
        yield* print(
          json,
          { matched: ids.length, queued, already_pending: pending, not_replayable: unsendable },
          `Queued ${queued} of ${ids.length} matching deliveries again (same webhook-id each)` +
            `${pending === 0 ? "" : `; ${pending} were already pending`}` +
            `${
              unsendable === 0
                ? ""
                : `; ${unsendable} not replayed: their subscription was removed or is disabled (enable a disabled one first)`
            }.`
        )
      })
    )
).pipe(
  Command.withDescription(
    "Send webhook deliveries again with the same webhook-id: one, or every one in a status. " +
      "One with --id, or every delivery in --status (optionally of --account, created since --since), with a progress bar on a terminal and a final count. " +
      "A delivery whose subscription was removed or is disabled is not sent again (enable a disabled one first)."
  )
)

/** `crm-relay deliveries`. */
export const command = Command.make("deliveries").pipe(
  Command.withDescription("Watch and replay webhook deliveries."),
  Command.withSubcommands([list, replay])
)
