/**
 * Handlers of the deliveries group of the internal API (see DeliveriesApi).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Events } from "@crm-relay/contract"
import { Accounts, Deliveries } from "@crm-relay/events"
import { Effect, Layer, Option } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import * as Replay from "./Replay.js"
import {
  type AttemptView,
  type DeliveryDetail,
  DeliveryNotReplayable,
  type DeliveryPage,
  type DeliveryView
} from "@crm-relay/contract/InternalApi/DeliveriesApi"

/** Sentences of the deliveries group's errors. */
export const messages = {
  unknownDelivery: "No delivery with this id exists.",
  unknownCursor: "cursor is not a delivery of this account; pass the next_cursor of the previous page."
} as const

const iso = (date: Date) => date.toISOString()

/** A receiver URL for display: the query string (often a token) is hidden. */
export const displayTarget = (url: string): string => {
  const parsed = URL.parse(url)
  if (parsed === null) return url.replace(/[?#].*$/s, "")
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}${parsed.search === "" ? "" : "?…"}`
}

/** Whether (and until when) a pending delivery waits for its failing receiver origin. */
export const heldView = (d: Deliveries.Delivery): DeliveryView["held"] =>
  d.held_since === null || d.held_next_try_at === null
    ? null
    : { failing_since: iso(d.held_since), next_try_at: iso(d.held_next_try_at) }

/** A delivery for the operator. */
export const deliveryView = (d: Deliveries.Delivery): DeliveryView => ({
  id: d.id,
  event: d.event,
  call_id: d.call_id,
  subscription_id: d.subscription_id,
  target: displayTarget(d.target_url),
  status: d.status,
  attempts: d.attempts,
  last_error: d.last_error,
  next_attempt_at: d.status === "pending" ? iso(d.next_attempt_at) : null,
  held: heldView(d),
  created_at: iso(d.created_at),
  delivered_at: d.delivered_at === null ? null : iso(d.delivered_at),
  last_attempt: d.last_attempt_at === null
    ? null
    : { at: iso(d.last_attempt_at), status_code: d.last_status_code, error_class: d.last_error_class }
})

/** One attempt as the operator (and the account, in the Integrations area) sees it. */
export const attemptView = (a: Deliveries.Attempt): AttemptView => ({
  attempt: a.attempt,
  at: iso(a.started_at),
  status_code: a.status_code,
  duration_ms: a.duration_ms,
  error_class: a.error_class,
  error: a.error,
  result: a.result
})

/** A page for the operator. */
export const pageView = (page: Deliveries.DeliveryPage): DeliveryPage => ({
  deliveries: page.deliveries.map(deliveryView),
  next_cursor: Option.getOrNull(page.nextCursor)
})

/** One delivery and its attempts for the operator. */
export const detailView = (found: { readonly delivery: Deliveries.Delivery; readonly attempts: ReadonlyArray<Deliveries.Attempt> }): DeliveryDetail => ({
  ...deliveryView(found.delivery),
  attempt_log: found.attempts.map(attemptView)
})

const DeliveriesLive = HttpApiBuilder.group(InternalApi, "deliveries", (handlers) =>
  Effect.gen(function*() {
    const deliveries = yield* Deliveries.Deliveries
    const accounts = yield* Accounts.Accounts
    return handlers
      .handle("list", ({ path, urlParams }) =>
        Effect.gen(function*() {
          if (Option.isNone(yield* accounts.find(path.id))) return yield* unknownAccount()
          const page = yield* deliveries.list(path.id, { limit: urlParams.limit, cursor: urlParams.cursor }).pipe(
            Effect.catchTag("UnknownCursor", () => new Events.BadRequest({ error: messages.unknownCursor }))
          )
          return pageView(page)
        }))
      .handle("find", ({ path }) =>
        Effect.flatMap(deliveries.find(path.id), (found) =>
          Option.isNone(found)
            ? new Events.NotFound({ error: messages.unknownDelivery })
            : Effect.succeed(detailView(found.value))))
      .handle("replay", ({ path }) =>
        deliveries.replay(path.id).pipe(
          Effect.flatMap((outcome): Effect.Effect<Replay.Replayed, Events.NotFound | DeliveryNotReplayable> =>
            Deliveries.isUnsendable(outcome)
              ? Effect.fail(new DeliveryNotReplayable({ error: Deliveries.notReplayable[outcome] }))
              : Replay.found(() => new Events.NotFound({ error: messages.unknownDelivery }))(outcome)
          ),
          Effect.map((outcome) => ({ id: path.id, outcome }))
        ))
  }))

/** The deliveries handlers (with the Deliveries service; needs the database and Accounts). */
export const layer = DeliveriesLive.pipe(Layer.provide(Deliveries.Deliveries.Default))
