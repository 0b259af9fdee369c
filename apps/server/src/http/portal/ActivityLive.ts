/**
 * The activity group of the Integrations area's API: the account's webhook
 * deliveries (to hooks and destinations) with their attempts and replay, and
 * its CRM pushes with replay. An id of another account's delivery or push is
 * answered 404, as an unknown one.
 */
import { HttpApiBuilder } from "@effect/platform"
import { CrmPushJobs } from "@crm-relay/calls"
import { Events, PortalApi } from "@crm-relay/contract"
import { Deliveries } from "@crm-relay/events"
import { Effect, Option } from "effect"
import { attemptView, displayTarget, heldView } from "../internal/DeliveriesApiLive.js"
import { messages } from "./PortalMessages.js"

const { CurrentSession } = PortalApi

const iso = (date: Date) => date.toISOString()
const hostOf = (url: string) => URL.parse(url)?.host ?? ""

/** A delivery as the page lists it (the activity list, a destination's latest deliveries). */
export const deliveryView = (d: Deliveries.Delivery): PortalApi.DeliveryView => ({
  id: d.id,
  created_at: iso(d.created_at),
  event: d.event,
  call_id: d.call_id,
  target: displayTarget(d.target_url),
  target_host: hostOf(d.target_url),
  status: d.status,
  attempts: d.attempts,
  last_status_code: d.last_status_code,
  last_duration_ms: d.last_duration_ms,
  last_error_class: d.last_error_class,
  last_error: d.last_error,
  end_reason: d.end_reason === "gone" || d.end_reason === "aborted" || d.end_reason === "disabled" ? d.end_reason : null,
  held: heldView(d),
  test: d.test
})

/** A receipt's id, when the stored receipt has one. */
const receiptId = (receipt: unknown): string | null =>
  typeof receipt === "object" && receipt !== null && "id" in receipt && typeof receipt.id === "string" ? receipt.id : null

/** The activity handlers. */
export const ActivityLive = HttpApiBuilder.group(PortalApi.PortalApi, "activity", (handlers) =>
  Effect.gen(function*() {
    const deliveries = yield* Deliveries.Deliveries
    const pushes = yield* CrmPushJobs.CrmPushJobs
    const ownDelivery = (accountId: string, id: string) =>
      Effect.flatMap(deliveries.find(id), (found) =>
        Option.isSome(found) && found.value.delivery.account_id === accountId
          ? Effect.succeed(found.value)
          : Effect.fail(new Events.NotFound({ error: messages.unknownDelivery })))
    return handlers
      .handle("deliveries", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const page = yield* deliveries.list(accountId, {
            limit: 50,
            cursor: urlParams.cursor,
            status: urlParams.status,
            event: urlParams.event
          }).pipe(Effect.catchTag("UnknownCursor", () => new Events.BadRequest({ error: "cursor is not a delivery of this account." })))
          return { deliveries: page.deliveries.map(deliveryView), next_cursor: Option.getOrNull(page.nextCursor) }
        }))
      .handle("delivery", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const found = yield* ownDelivery(accountId, path.id)
          const payload = yield* deliveries.payload(path.id)
          const refusal = found.delivery.status === "pending" ? Option.none() : yield* deliveries.notReplayable(path.id)
          return {
            ...deliveryView(found.delivery),
            payload: Option.getOrElse(payload, () => ""),
            attempt_log: found.attempts.map(attemptView),
            not_replayable: Option.match(refusal, { onNone: () => null, onSome: (reason) => Deliveries.notReplayable[reason] })
          }
        }))
      .handle("replayDelivery", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          yield* ownDelivery(accountId, path.id)
          const outcome = yield* deliveries.replay(path.id)
          if (outcome === "not_found" || outcome === "completed") return yield* new Events.NotFound({ error: messages.unknownDelivery })
          if (Deliveries.isUnsendable(outcome)) return yield* new PortalApi.NothingToReplay({ error: Deliveries.notReplayable[outcome] })
          return { id: path.id, outcome }
        }))
      .handle("pushes", () =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const jobs = yield* pushes.list({ accountId, statuses: ["pending", "succeeded", "failed"], limit: 50 })
          const detailed = yield* Effect.forEach(jobs, (job) => Effect.map(pushes.find(job.id), (found) => Option.getOrUndefined(found)))
          return {
            pushes: detailed.filter((job) => job !== undefined).map((job): PortalApi.PushView => ({
              id: job.id,
              call_id: job.call_id,
              tenant_id: job.tenant_id,
              status: job.status,
              attempts: job.previous_attempts + job.attempts,
              error_class: job.error_class,
              last_error: job.status === "succeeded" ? null : job.last_error,
              updated_at: iso(job.updated_at),
              steps: job.receipts.map((step) => ({ operation: step.operation, outcome: step.outcome, receipt_id: receiptId(step.receipt) }))
            }))
          }
        }))
      .handle("replayPush", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const job = yield* pushes.find(path.id)
          if (Option.isNone(job) || job.value.account_id !== accountId) return yield* new Events.NotFound({ error: messages.unknownPush })
          const outcome = yield* pushes.replay(path.id)
          if (outcome === "not_found") return yield* new Events.NotFound({ error: messages.unknownPush })
          if (outcome === "completed") return yield* new PortalApi.NothingToReplay({ error: messages.pushSucceeded })
          return { id: path.id, outcome }
        }))
  }))
