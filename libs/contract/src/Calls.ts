/**
 * The call pipeline's payloads as the internal API shows them: an accepted
 * outcome and where it went, an account's routing rules, CRM push jobs and
 * their stored steps.
 */
import { Schema } from "effect"
import { Classification } from "./CallOutcome.js"
import * as Operations from "./Operations.js"
import * as Values from "./Values.js"

/** Where an accepted outcome went. */
export const RouteName = Schema.Literal("push", "event", "store").annotations({ identifier: "OutcomeRoute" })
export type RouteName = typeof RouteName.Type

/** The 202 answer: what was (or, for a duplicate, had already been) done with the outcome. */
export const Accepted = Schema.Struct({
  call_id: Schema.String,
  /** True when this call id had already been accepted with the same body; nothing new was queued. */
  duplicate: Schema.Boolean,
  /** `push`: a CRM push job was queued; `event`: the event was fanned out at once; `store`: stored only. */
  route: RouteName,
  /** One sentence saying why the route was chosen. */
  reason: Schema.String,
  /** The CRM push job, when one was queued. */
  push_job_id: Schema.optionalWith(Schema.String, { exact: true }),
  /** How many deliveries the event produced, once it was fanned out. */
  deliveries: Schema.optionalWith(Schema.Int, { exact: true })
}).annotations({ identifier: "OutcomeAccepted" })
export type Accepted = typeof Accepted.Type

/** A stored outcome, as the internal API shows it. */
export const StoredOutcome = Schema.Struct({
  call_id: Schema.String,
  account_id: Schema.String,
  tenant_id: Schema.String,
  classification: Schema.String,
  route: RouteName,
  route_reason: Schema.String,
  event_kind: Schema.NullOr(Schema.Literal("lead", "booking")),
  event_deliveries: Schema.NullOr(Schema.Int),
  event_fanned_out_at: Schema.NullOr(Schema.DateFromSelf),
  received_at: Schema.DateFromSelf,
  body: Values.Json
}).annotations({ identifier: "StoredOutcome" })
export type StoredOutcome = typeof StoredOutcome.Type

/** An account's routing rules. */
export const RoutingRules = Schema.Struct({
  /** Whether outcomes of a live account with a bridge connection are pushed to the CRM. */
  crm_push: Schema.Boolean,
  /** The classifications that are pushed and announced; every other one is only stored. */
  classifications: Schema.Array(Classification).pipe(Schema.maxItems(50))
}).annotations({ identifier: "RoutingRules" })
export type RoutingRules = typeof RoutingRules.Type

/** A change of rules: each field optional, the others kept. */
export const RoutingRulesPatch = Schema.Struct({
  crm_push: Schema.optionalWith(Schema.Boolean, { exact: true }),
  classifications: Schema.optionalWith(Schema.Array(Classification).pipe(Schema.maxItems(50)), { exact: true })
}).annotations({ identifier: "RoutingRulesPatch" })
export type RoutingRulesPatch = typeof RoutingRulesPatch.Type

/** Job status as stored. */
export const PushStatus = Schema.Literal("pending", "succeeded", "failed")
export type PushStatus = typeof PushStatus.Type

/** Error classes a failed job can carry. */
export const ErrorClass = Schema.Literal("Conflict", "Transient", "Auth", "Permanent", "NotSupported", "NotConfigured")
export type ErrorClass = typeof ErrorClass.Type

/** A push job as the operator sees it. */
export const PushJob = Schema.Struct({
  id: Schema.String,
  call_id: Schema.String,
  account_id: Schema.String,
  tenant_id: Schema.String,
  status: PushStatus,
  attempts: Schema.Int,
  /** Attempts of the runs before the latest replay (the history a replay keeps). */
  previous_attempts: Schema.Int,
  next_attempt_at: Schema.DateFromSelf,
  error_class: Schema.NullOr(ErrorClass),
  last_error: Schema.NullOr(Schema.String),
  result: Schema.NullOr(Values.Json),
  replays: Schema.Int,
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf,
  finished_at: Schema.NullOr(Schema.DateFromSelf)
}).annotations({ identifier: "PushJob" })
export type PushJob = typeof PushJob.Type

/** Whether the step produced a receipt, or was refused and handled (a requested booking that fell back to a lead). */
export const StepOutcome = Schema.Literal("receipt", "refused")
export type StepOutcome = typeof StepOutcome.Type

/** One stored step. */
export const StoredStep = Schema.Struct({
  operation: Schema.Literal(...Operations.WRITE_OPERATIONS),
  idempotency_key: Schema.String,
  outcome: StepOutcome,
  receipt: Values.Json
}).annotations({ identifier: "StoredStep" })
export type StoredStep = typeof StoredStep.Type
