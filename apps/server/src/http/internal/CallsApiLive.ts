/**
 * Handlers of the post-call groups of the internal API (see CallsApi).
 */
import { HttpApiBuilder } from "@effect/platform"
import { CrmPushJobs, Outcomes, Routing } from "@crm-relay/calls"
import { Events } from "@crm-relay/contract"
import { Accounts } from "@crm-relay/events"
import { type Context, Effect, Layer, Option, Schema, Struct } from "effect"
import type { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import * as Replay from "./Replay.js"
import { OutcomeConflict, outcomeAsStored, type OutcomeView, PushSucceeded, type PushJobView } from "@crm-relay/contract/InternalApi/CallsApi"

/** Sentences of the post-call errors. */
export const messages = {
  unknownOutcome: "No outcome has been accepted for this call id.",
  unknownPush: "No CRM push job with this id exists.",
  pushSucceeded: (id: string) =>
    `CRM push job ${id} already succeeded; replaying it would push the call to the CRM again. Pass force to do it anyway.`,
  outcomeConflict: (callId: string) =>
    `Call ${callId} already has a different outcome; an outcome is accepted once per call.`
} as const

/** `outcomes.accept` with its failures as the API answers them (404 for the account, 409 for the call): the router's handler and the outcome path's. */
export const acceptOutcome = (outcomes: Context.Tag.Service<typeof Outcomes.Outcomes>, callId: string, outcome: CallOutcome) =>
  outcomes.accept(callId, outcome).pipe(
    Effect.catchTags({
      UnknownAccount: unknownAccount,
      OutcomeConflict: () => new OutcomeConflict({ error: messages.outcomeConflict(callId) })
    })
  )

// The listing's `status` parameter was checked by its pattern; this only narrows the type.
const decodeStatuses = Schema.decodeUnknownSync(Schema.Array(CrmPushJobs.PushStatus))
const iso = (date: Date) => date.toISOString()

/** A push job for the operator: times as ISO strings, and whether a failure was a stop or a dead letter. */
export const pushView = (job: CrmPushJobs.PushJob | CrmPushJobs.PushJobDetail): PushJobView => ({
  id: job.id,
  call_id: job.call_id,
  account_id: job.account_id,
  tenant_id: job.tenant_id,
  status: job.status,
  failure: job.status !== "failed" ? null : job.error_class === "Transient" ? "dead_lettered" : "stopped",
  attempts: job.attempts,
  previous_attempts: job.previous_attempts,
  next_attempt_at: iso(job.next_attempt_at),
  error_class: job.error_class,
  last_error: job.last_error,
  result: job.result,
  replays: job.replays,
  created_at: iso(job.created_at),
  updated_at: iso(job.updated_at),
  finished_at: job.finished_at === null ? null : iso(job.finished_at),
  ...("receipts" in job ? { receipts: job.receipts } : {})
})

const OutcomesLive = HttpApiBuilder.group(InternalApi, "outcomes", (handlers) =>
  Effect.gen(function*() {
    const outcomes = yield* Outcomes.Outcomes
    const jobs = yield* CrmPushJobs.CrmPushJobs
    return handlers
      .handle("accept", ({ path, payload }) => acceptOutcome(outcomes, path.callId, payload))
      .handle("find", ({ path }) =>
        Effect.gen(function*() {
          const stored = yield* outcomes.find(path.callId)
          if (Option.isNone(stored)) return yield* new Events.NotFound({ error: messages.unknownOutcome })
          const o = stored.value
          const push = yield* jobs.findByCall(path.callId)
          return {
            ...Struct.pick(o, ...outcomeAsStored),
            event: o.event_kind === null || o.event_fanned_out_at === null
              ? null
              : { kind: o.event_kind, deliveries: o.event_deliveries ?? 0, fanned_out_at: iso(o.event_fanned_out_at) },
            received_at: iso(o.received_at),
            outcome: o.body,
            push: Option.getOrNull(Option.map(push, pushView))
          } satisfies OutcomeView
        }))
  }))

const RoutingLive = HttpApiBuilder.group(InternalApi, "routing", (handlers) =>
  Effect.gen(function*() {
    const routing = yield* Routing.Routing
    const accounts = yield* Accounts.Accounts
    const known = (id: string) =>
      Effect.flatMap(accounts.find(id), (account) =>
        Option.isNone(account) ? unknownAccount() : Effect.void)
    return handlers
      .handle("get", ({ path }) => Effect.zipRight(known(path.id), routing.get(path.id)))
      .handle("set", ({ path, payload }) => Effect.zipRight(known(path.id), routing.set(path.id, payload)))
  }))

const PushesLive = HttpApiBuilder.group(InternalApi, "pushes", (handlers) =>
  Effect.gen(function*() {
    const jobs = yield* CrmPushJobs.CrmPushJobs
    return handlers
      .handle("list", ({ urlParams }) =>
        jobs.list({
          statuses: decodeStatuses((urlParams.status ?? "failed").split(",")),
          ...(urlParams.account !== undefined ? { accountId: urlParams.account } : {}),
          ...(urlParams.limit !== undefined ? { limit: urlParams.limit } : {})
        }).pipe(Effect.map((list) => ({ pushes: list.map(pushView) }))))
      .handle("find", ({ path }) =>
        Effect.flatMap(jobs.find(path.id), (job) =>
          Option.isNone(job)
            ? new Events.NotFound({ error: messages.unknownPush })
            : Effect.succeed(pushView(job.value))))
      .handle("replay", ({ path, urlParams }) =>
        jobs.replay(path.id, { force: urlParams.force === "true" }).pipe(
          Effect.flatMap(Replay.found(
            () => new Events.NotFound({ error: messages.unknownPush }),
            () => new PushSucceeded({ error: messages.pushSucceeded(path.id) })
          )),
          Effect.map((outcome) => ({ id: path.id, outcome }))
        ))
  }))

/** The post-call handlers; they need the call pipeline's services. */
export const layer = Layer.mergeAll(OutcomesLive, RoutingLive, PushesLive)
