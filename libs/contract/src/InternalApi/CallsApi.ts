/**
 * The post-call part of the internal API: call outcomes, the accounts'
 * routing rules, and the CRM push jobs the operator watches and replays.
 *
 * - `POST /v1/calls/{callId}/outcome` → 202 `OutcomeAccepted`. The same call
 *   id with the same body again → 202 with `duplicate: true` (nothing new is
 *   queued); with a different body → 409. A body that fails validation → 400
 *   naming the field; an unknown `account_id` → 404.
 * - `GET /v1/calls/{callId}/outcome` → the stored outcome, its route and the
 *   push job with its receipts.
 * - `GET|PUT /v1/accounts/{id}/routing` → `{crm_push, classifications}`.
 * - `GET /v1/crm-pushes?status=failed|pending|succeeded&account=ID&limit=N`,
 *   `GET /v1/crm-pushes/{id}`, `POST /v1/crm-pushes/{id}/replay[?force=true]`: a
 *   failed job is queued again (its attempts so far kept in
 *   `previous_attempts`); a succeeded one only with `force=true` (409 otherwise:
 *   the push would run again).
 *
 * The groups get the admin-token middleware where InternalApi adds them
 * (importing it here would be an import cycle).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import * as CallOutcome from "../CallOutcome.js"
import * as Calls from "../Calls.js"
import * as Events from "../Events.js"
import * as Values from "../Values.js"
import { Schema, Struct } from "effect"
import { ReplayAnswer } from "./ReplayAnswer.js"

/** 409: the call already has a different outcome. */
export class OutcomeConflict extends Schema.TaggedError<OutcomeConflict>()("OutcomeConflict", { error: Schema.String }) {
  static readonly wire = Events.errorObject(this, 409, "The call already has a different outcome; an outcome is accepted once per call.")
}

/** 409: the job already succeeded; replaying it needs `force=true`. */
export class PushSucceeded extends Schema.TaggedError<PushSucceeded>()("PushSucceeded", { error: Schema.String }) {
  static readonly wire = Events.errorObject(
    this,
    409,
    "The CRM push job already succeeded; replay it with force=true to push it again.",
    "PushSucceededError"
  )
}

/** Query of POST /v1/crm-pushes/{id}/replay. */
export const PushReplayParams = Schema.Struct({
  force: Schema.optionalWith(
    Schema.Literal("true", "false").annotations({ message: () => "force must be true or false" }),
    { exact: true }
  )
})

/**
 * A push job as the operator sees it: the stored job with its times as ISO
 * strings, whether a failure was a stop or a dead letter, and, when one job
 * is read, its stored steps.
 */
export const PushJobView = Schema.Struct({
  ...Calls.PushJob.fields,
  /** `stopped` (Conflict, Auth, Permanent, NotSupported, NotConfigured) or `dead_lettered` (retries ran out). */
  failure: Schema.NullOr(Schema.Literal("stopped", "dead_lettered")),
  next_attempt_at: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
  receipts: Schema.optionalWith(Schema.Array(Calls.StoredStep), { exact: true })
}).annotations({ identifier: "PushJobView" })
export type PushJobView = typeof PushJobView.Type

/** The fields of a stored outcome its view shows unchanged. */
export const outcomeAsStored = ["call_id", "account_id", "tenant_id", "classification", "route", "route_reason"] as const

/**
 * GET /v1/calls/{callId}/outcome: the stored outcome's call, account, tenant
 * and route as stored; its event, times and push as the operator reads them.
 */
export const OutcomeView = Schema.Struct({
  ...Struct.pick(Calls.StoredOutcome.fields, ...outcomeAsStored),
  event: Schema.NullOr(Schema.Struct({
    kind: Schema.Literal("lead", "booking"),
    deliveries: Schema.Int,
    fanned_out_at: Schema.String
  })),
  received_at: Schema.String,
  outcome: Values.Json,
  push: Schema.NullOr(PushJobView)
}).annotations({ identifier: "OutcomeView" })
export type OutcomeView = typeof OutcomeView.Type

/** `status` filter of the push job listing: comma-separated statuses, `failed` by default. */
export const PushListParams = Schema.Struct({
  status: Schema.optionalWith(
    Schema.String.pipe(
      Schema.pattern(/^(pending|succeeded|failed)(,(pending|succeeded|failed))*$/, {
        message: () => "status must be pending, succeeded or failed (comma-separated)"
      })
    ),
    { exact: true }
  ),
  account: Schema.optionalWith(Schema.String, { exact: true }),
  limit: Schema.optionalWith(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000)), { exact: true })
})

/** Call outcomes. */
export class OutcomesGroup extends HttpApiGroup.make("outcomes")
  .add(
    HttpApiEndpoint.post("accept", "/v1/calls/:callId/outcome")
      .annotate(OpenApi.Summary, "Accept a call outcome")
      .setPath(Schema.Struct({ callId: CallOutcome.CallId }))
      .setPayload(CallOutcome.CallOutcome)
      .addSuccess(Calls.Accepted, { status: 202 })
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
      .addError(OutcomeConflict.wire)
  )
  .add(
    HttpApiEndpoint.get("find", "/v1/calls/:callId/outcome")
      .annotate(OpenApi.Summary, "Get a call outcome, its route and its push")
      .setPath(Schema.Struct({ callId: Schema.String }))
      .addSuccess(OutcomeView)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "Call outcomes from the call-handling service.")
{}

/** Routing rules per account. */
export class RoutingGroup extends HttpApiGroup.make("routing")
  .add(
    HttpApiEndpoint.get("get", "/v1/accounts/:id/routing")
      .annotate(OpenApi.Summary, "Get an account's routing rules")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Calls.RoutingRules)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.put("set", "/v1/accounts/:id/routing")
      .annotate(OpenApi.Summary, "Change an account's routing rules")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(Calls.RoutingRulesPatch)
      .addSuccess(Calls.RoutingRules)
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "Which outcomes of an account are pushed to its CRM and announced.")
{}

/** CRM push jobs: what failed, and replay. */
export class PushesGroup extends HttpApiGroup.make("pushes")
  .add(
    HttpApiEndpoint.get("list", "/v1/crm-pushes")
      .annotate(OpenApi.Summary, "List CRM push jobs")
      .setUrlParams(PushListParams)
      .addSuccess(Schema.Struct({ pushes: Schema.Array(PushJobView) }))
      .addError(Events.BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.get("find", "/v1/crm-pushes/:id")
      .annotate(OpenApi.Summary, "Get a CRM push job")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(PushJobView)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("replay", "/v1/crm-pushes/:id/replay")
      .annotate(OpenApi.Summary, "Replay a CRM push job")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setUrlParams(PushReplayParams)
      .addSuccess(ReplayAnswer, { status: 202 })
      .addError(Events.BadRequest.wire)
      .addError(Events.NotFound.wire)
      .addError(PushSucceeded.wire)
  )
  .annotate(OpenApi.Description, "CRM push jobs: watch them and replay them.")
{}
