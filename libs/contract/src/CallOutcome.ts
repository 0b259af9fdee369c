/**
 * The body of `POST /v1/calls/{callId}/outcome` (shared/DESIGN.md,
 * "Post-call"), described once over the contract's value Schemas.
 *
 * Present fields are required (empty strings and arrays allowed), optional
 * ones are omitted rather than null; an empty `postal_code` or `service_id`
 * is taken as absent (the contract omits them when empty). A booking's
 * instants carry an explicit offset and its end is after its start
 * (Operation rules 7 and 8), so a refused outcome is answered 400 naming the
 * field before anything is stored.
 */
import * as Resources from "./Resources.js"
import * as Values from "./Values.js"
import { Schema } from "effect"

const Optional = Resources.Optional
const Strings = Schema.Array(Schema.String)

/** The caller as captured during the call. */
export const Caller = Schema.Struct({
  full_name: Schema.String,
  first_name: Schema.String,
  last_name: Schema.String,
  phones: Strings,
  emails: Strings,
  address: Schema.String,
  postal_code: Resources.OmittedWhenEmpty("Omitted when no postal code is supplied.")
}).annotations({ identifier: "OutcomeCaller" })
export type Caller = typeof Caller.Type

/** The lead captured during the call. */
export const LeadDetails = Schema.Struct({
  job_type: Schema.String,
  summary: Schema.String,
  notes: Schema.String,
  urgency: Schema.String
}).annotations({ identifier: "OutcomeLead" })
export type LeadDetails = typeof LeadDetails.Type

/** `booked`: created in-call (with its receipt's id); `requested`: post-call tries to book it. */
export const BookingStatus = Schema.Literal("booked", "requested").annotations({ identifier: "BookingStatus" })
export type BookingStatus = typeof BookingStatus.Type

/** A booking captured during the call. */
export const Booking = Schema.Struct({
  status: BookingStatus,
  appointment_external_id: Optional(Values.NonBlankString),
  contact_external_id: Optional(Values.NonBlankString),
  start: Values.Instant,
  end: Values.Instant,
  timezone: Values.TimeZone,
  slot_text: Schema.String,
  title: Schema.String,
  notes: Schema.String,
  address: Schema.String,
  job_type: Schema.String,
  service_id: Resources.OmittedWhenEmpty("Omitted when empty.")
}).pipe(
  Schema.filter((b) => Values.endAfterStart(b) || { path: ["end"], message: "end must be after start" }),
  Schema.filter((b) =>
    b.status !== "booked" || b.appointment_external_id !== undefined ||
    { path: ["appointment_external_id"], message: "appointment_external_id is required when status is booked" }
  )
).annotations({ identifier: "OutcomeBooking" })
export type Booking = typeof Booking.Type

/** A call classification: a lowercase word such as `lead`, `booking`, `spam` or `wrong_number`. */
export const Classification = Schema.String.pipe(
  Schema.pattern(/^[a-z][a-z0-9_]{0,63}$/, {
    message: () => "classification must be a lowercase word such as lead, booking, spam or wrong_number"
  })
).annotations({ identifier: "Classification" })

/** The classifications that reach the CRM and the Event API unless an account's routing rules narrow them. */
export const DEFAULT_PUSH_CLASSIFICATIONS: ReadonlyArray<string> = ["lead", "booking"]

/** A call outcome as the call-handling service posts it. */
export const CallOutcome = Schema.Struct({
  account_id: Schema.UUID,
  tenant_id: Schema.String.pipe(Schema.minLength(1, { message: () => "tenant_id must not be empty" })),
  classification: Classification,
  source: Schema.String,
  tags: Strings,
  location: Optional(Resources.Location),
  caller: Caller,
  lead: LeadDetails,
  booking: Optional(Booking)
}).pipe(
  Schema.filter((o) =>
    o.classification !== "booking" || o.booking !== undefined ||
    { path: ["booking"], message: "booking is required when classification is booking" }
  )
).annotations({ identifier: "CallOutcome", title: "Call outcome" })
export type CallOutcome = typeof CallOutcome.Type
export type CallOutcomeEncoded = typeof CallOutcome.Encoded

/** A call id in the path: 1 to 200 visible characters. */
export const CallId = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,200}$/, { message: () => "the call id must be 1 to 200 visible ASCII characters" })
).annotations({ identifier: "CallId" })
