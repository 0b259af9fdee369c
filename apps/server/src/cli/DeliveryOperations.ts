/**
 * What the CLI does to webhook deliveries (list an account's, replay one),
 * behind one tag with two Layers chosen by DataAccess: directly on the
 * database, or through the running server's internal API when the embedded
 * database belongs to it.
 */
import { Events } from "@crm-relay/contract"
import { Accounts, Deliveries } from "@crm-relay/events"
import { Migrations } from "@crm-relay/store"
import { Context, Data, Effect, Layer, Option } from "effect"
import { type AdminError, databaseFailure, refused, unknownAccount } from "./AdminError.js"
import type { PageRequest } from "./AdminOperations.js"
import { DeliveryNotReplayable, type DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { messages, pageView } from "../http/internal/DeliveriesApiLive.js"
import * as Replay from "../http/internal/Replay.js"
import type { CliSettings } from "../config/Settings.js"
import * as DataAccess from "./DataAccess.js"

/** Which deliveries `search` finds. */
export interface SearchFilter {
  readonly statuses: ReadonlyArray<Deliveries.DeliveryStatus>
  readonly accountId: Option.Option<string>
  /** Created at or after this time. */
  readonly since: Option.Option<Date>
}

/** Delivery operations for the CLI. */
export class DeliveryOperations extends Context.Tag("@crm-relay/server/DeliveryOperations")<DeliveryOperations, {
  /** A page of the account's deliveries, latest first. */
  readonly list: (
    accountId: string,
    options: { readonly limit: number; readonly cursor: Option.Option<string> }
  ) => Effect.Effect<DeliveryPage, AdminError>
  /** A page of deliveries in `statuses`, across accounts or of one, latest first. */
  readonly search: (filter: SearchFilter, page: PageRequest) => Effect.Effect<DeliveryPage, AdminError>
  /**
   * Queues a delivered or failed delivery again (same webhook-id); refused
   * (`NotReplayable`) when its subscription was removed or is disabled.
   */
  readonly replay: (id: string) => Effect.Effect<Replay.Replayed, AdminError | NotReplayable>
}>() {}

/** The delivery's subscription was removed or is disabled: a replay would send nothing. `message` says which and what to do. */
export class NotReplayable extends Data.TaggedError("NotReplayable")<{ readonly message: string }> {}

const unknownDelivery = (id: string) => refused(`No delivery with id ${id} exists.`)

/** On the database of the context (migrated first). */
export const layerDirect = Layer.effect(
  DeliveryOperations,
  Effect.gen(function*() {
    const deliveries = yield* Deliveries.Deliveries
    const accounts = yield* Accounts.Accounts
    return DeliveryOperations.of({
      list: (accountId, options) =>
        Effect.gen(function*() {
          if (Option.isNone(yield* accounts.find(accountId))) return yield* unknownAccount(accountId)
          const page = yield* deliveries.list(accountId, { limit: options.limit, cursor: Option.getOrUndefined(options.cursor) }).pipe(
            Effect.catchTag("UnknownCursor", () => Effect.fail(refused(`--cursor: ${messages.unknownCursor}`)))
          )
          return pageView(page)
        }).pipe(Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))),
      search: (filter, page) =>
        Effect.gen(function*() {
          if (Option.isSome(filter.accountId) && Option.isNone(yield* accounts.find(filter.accountId.value))) {
            return yield* unknownAccount(filter.accountId.value)
          }
          const found = yield* deliveries.search({
            statuses: filter.statuses,
            accountId: Option.getOrUndefined(filter.accountId),
            since: Option.getOrUndefined(filter.since),
            limit: page.limit,
            cursor: Option.getOrUndefined(page.cursor)
          }).pipe(Effect.catchTag("UnknownCursor", () => Effect.fail(refused(`--cursor: ${messages.unknownCursor}`))))
          return pageView(found)
        }).pipe(Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect)))),
      replay: (id) =>
        deliveries.replay(id).pipe(
          Effect.catchAllDefect((defect) => Effect.fail(databaseFailure(defect))),
          Effect.flatMap((outcome): Effect.Effect<Replay.Replayed, AdminError | NotReplayable> =>
            Deliveries.isUnsendable(outcome)
              ? Effect.fail(new NotReplayable({ message: Deliveries.notReplayable[outcome] }))
              : Replay.found(() => unknownDelivery(id))(outcome)
          )
        )
    })
  })
).pipe(
  Layer.provide(Layer.merge(Deliveries.Deliveries.Default, Accounts.Accounts.Default)),
  Layer.provide(Migrations.layer)
)

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(DeliveryOperations, ({ client, explain }) => {
  const fail = (notFound: AdminError) => (error: { readonly _tag: string }): AdminError =>
    error instanceof Events.BadRequest ? refused(error.error) : error._tag === "NotFound" ? notFound : explain(error)
  return DeliveryOperations.of({
    list: (accountId, options) =>
      client.deliveries.list({
        path: { id: accountId },
        urlParams: { limit: options.limit, ...(Option.isSome(options.cursor) ? { cursor: options.cursor.value } : {}) }
      }).pipe(Effect.mapError(fail(unknownAccount(accountId)))),
    search: (filter, page) =>
      client.deliverySearch.search({
        urlParams: {
          status: filter.statuses.join(","),
          limit: page.limit,
          ...(Option.isSome(page.cursor) ? { cursor: page.cursor.value } : {}),
          ...(Option.isSome(filter.accountId) ? { account: filter.accountId.value } : {}),
          ...(Option.isSome(filter.since) ? { since: filter.since.value } : {})
        }
      }).pipe(
        Effect.mapError((error) =>
          error instanceof Events.BadRequest && error.error.startsWith("account:") && Option.isSome(filter.accountId)
            ? unknownAccount(filter.accountId.value)
            : explain(error)
        )
      ),
    replay: (id) =>
      client.deliveries.replay({ path: { id } }).pipe(
        Effect.map((answer) => answer.outcome),
        Effect.mapError((error) =>
          error instanceof DeliveryNotReplayable ? new NotReplayable({ message: error.error }) : fail(unknownDelivery(id))(error)
        )
      )
  })
})

/** Chooses how to reach the deliveries (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<DeliveryOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect, remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(DeliveryOperations, layerFromSettings)
