/**
 * The in-call API's requests and answers (see `@crm-relay/calls/InCall` for
 * what each reason means and when it is given). Every answer is 200 with
 * `{ok: true, ...receipt}` or `Failure`: a request the server cannot take
 * (not JSON, too large, a field missing or of the wrong type, input the
 * contract refuses) is `{ok: false, reason: "rejected", message}` naming
 * the field, an unknown account `not_configured` — the one shape the voice
 * agent acts on mid-call.
 */
import { Schema } from "effect"
import * as Operations from "./Operations.js"
import * as Resources from "./Resources.js"

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/** Body of `.../contacts/search`: either may be empty (or left out). */
export const ContactsSearchRequest = Schema.Struct({
  phone: Schema.optionalWith(Schema.String, { default: () => "" }),
  email: Schema.optionalWith(Schema.String, { default: () => "" })
}).annotations({ identifier: "InCallContactsSearchRequest" })

/**
 * Body of `.../contacts/upsert`. The contact's shape is checked here, the
 * contract's rules on its content (a usable phone or email) by the client
 * before sending: either refusal is `rejected`.
 */
export const ContactsUpsertRequest = Schema.Struct({
  contact: Schema.encodedSchema(Resources.Contact)
}).annotations({ identifier: "InCallContactsUpsertRequest" })

/** Body of `.../availability`: the window (offsets and end-after-start checked before sending). */
export const AvailabilityRequest = Schema.Struct({
  window: Schema.encodedSchema(Resources.AvailabilityWindow)
}).annotations({ identifier: "InCallAvailabilityRequest" })

/** Body of `.../appointments`: the appointment (Operation rule 7 checked before sending). */
export const AppointmentRequest = Schema.Struct({
  appointment: Schema.encodedSchema(Resources.Appointment)
}).annotations({ identifier: "InCallAppointmentRequest" })

// ---------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------

/** Why an in-call operation has no receipt (see the module comment). */
export const Reason = Schema.Literal("conflict", "unavailable", "timeout", "rejected", "not_configured").annotations({
  identifier: "InCallReason"
})
export type Reason = typeof Reason.Type

/** No receipt: the reason, and one sentence of our own (never the bridge's body). */
export const Failure = Schema.Struct({
  ok: Schema.Literal(false),
  reason: Reason,
  message: Schema.String
}).annotations({ identifier: "InCallFailure" })
export type Failure = typeof Failure.Type

const answer = <Fields extends Schema.Struct.Fields>(identifier: string, receipt: Schema.Struct<Fields>) =>
  Schema.Union(Schema.Struct({ ok: Schema.Literal(true), ...receipt.fields }), Failure).annotations({ identifier })

/** `{ok: true, contact: {id} | null}` or a failure. */
export const ContactsSearchAnswer = answer("InCallContactsSearchAnswer", Operations.ContactsSearchResponse)
export type ContactsSearchAnswer = typeof ContactsSearchAnswer.Type
/** `{ok: true, id, is_new}` or a failure. */
export const ContactsUpsertAnswer = answer("InCallContactsUpsertAnswer", Operations.ContactsUpsertResponse)
export type ContactsUpsertAnswer = typeof ContactsUpsertAnswer.Type
/** `{ok: true, slots}` (sorted and de-duplicated by instant) or a failure. */
export const AvailabilityAnswer = answer("InCallAvailabilityAnswer", Operations.AvailabilityListResponse)
export type AvailabilityAnswer = typeof AvailabilityAnswer.Type
/** `{ok: true, id, confirmed: true, start, end, timezone}` — a confirmed, exact booking — or a failure. */
export const AppointmentAnswer = answer("InCallAppointmentAnswer", Operations.AppointmentsCreateResponse)
export type AppointmentAnswer = typeof AppointmentAnswer.Type
