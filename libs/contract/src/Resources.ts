/**
 * The svc.crm.v1 resources: Contact, Location, Lead, Appointment,
 * Availability window and Slot.
 *
 * Serialization rules 1–3 are carried by how fields are declared:
 * a Present field is a plain required field, so it is always encoded, even as
 * `""` or `[]`; an Optional field is `Schema.optionalWith(…, { exact: true })`,
 * so it is omitted when absent and a `null` is refused rather than sent;
 * decoding ignores unknown additional fields (Effect's default).
 *
 * An Optional string the contract says is "omitted when empty"
 * (`postal_code`, `service_id`) is {@link OmittedWhenEmpty}: callers may hold
 * `""`, and decoding — which is how every request body is built from our
 * values before it is sent — drops it, so it is never sent as `""` and never a
 * reason to refuse.
 */
import { identity, Option, Schema } from "effect"
import { endAfterStart, Instant, NonBlankString, TimeZone } from "./Values.js"

/** An Optional field: omitted when absent, never encoded as null (Serialization rule 2). */
export const Optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** A string with something in it: not empty, not only whitespace. */
const Supplied = Schema.String.pipe(
  Schema.filter((s) => s.trim() !== "", { message: () => "is omitted when empty, never sent as \"\"" })
)

/**
 * An Optional string that is omitted when empty (Serialization rule 2): an
 * empty (or blank) value decodes as absent, so it is never sent as `""`.
 */
export const OmittedWhenEmpty = (description: string) =>
  Schema.optionalToOptional(Schema.String.annotations({ description }), Supplied.annotations({ description }), {
    decode: Option.filter((s) => s.trim() !== ""),
    encode: identity
  })

/** A Present array of strings: always encoded, `[]` when empty (Serialization rule 1). */
const Strings = Schema.Array(Schema.String)

/** The caller as captured; the contact has no location object. */
export const Contact = Schema.Struct({
  full_name: Schema.String.annotations({ description: "Caller name as captured; empty when unknown." }),
  first_name: Schema.String.annotations({ description: "Given name; may be empty." }),
  last_name: Schema.String.annotations({ description: "Family name; may be empty." }),
  address: Schema.String.annotations({ description: "Service or street address from the caller; may be empty." }),
  source: Schema.String.annotations({ description: "Lead attribution text; may be empty." }),
  call_id: Schema.String.annotations({ description: "Originating call identifier; may be empty in-call." }),
  phones: Strings.annotations({ description: "Callback phone strings, normalized where possible; may be empty." }),
  emails: Strings.annotations({ description: "Emails as captured; may be empty." }),
  tags: Strings.annotations({ description: "Source tag strings; may be empty." }),
  postal_code: OmittedWhenEmpty("Omitted when no postal code is supplied.")
}).annotations({ identifier: "Contact", title: "Contact" })
export type Contact = typeof Contact.Type

/** Whether a contact carries at least one usable (nonblank) phone or email. */
export const hasUsableIdentity = (contact: Contact): boolean =>
  contact.phones.some((p) => p.trim() !== "") || contact.emails.some((e) => e.trim() !== "")

/** A configured location. */
export const Location = Schema.Struct({
  id: Schema.String.annotations({ description: "Configured location ID." }),
  name: Schema.String.annotations({ description: "Configured location name; may be empty." })
}).annotations({ identifier: "Location", title: "Location" })
export type Location = typeof Location.Type

/** A captured lead. */
export const Lead = Schema.Struct({
  job_type: Schema.String.annotations({ description: "Requested service or job type; free-form; may be empty." }),
  summary: Schema.String.annotations({ description: "Short description of the need or call result; may be empty." }),
  notes: Schema.String.annotations({ description: "Free-form details and instructions; may be empty." }),
  urgency: Schema.String.annotations({ description: "Urgency text or label; no fixed enum; may be empty." }),
  source: Schema.String.annotations({ description: "Attribution text; may be empty." }),
  call_id: Schema.String.annotations({ description: "Originating call identifier; may be empty." }),
  contact: Contact,
  location: Optional(Location)
}).annotations({ identifier: "Lead", title: "Lead" })
export type Lead = typeof Lead.Type

const appointmentFields = {
  contact_external_id: NonBlankString.annotations({
    description: "Durable contact ID previously returned by this bridge."
  }),
  timezone: TimeZone,
  start: Instant,
  end: Instant,
  slot_text: Schema.String.annotations({
    description: "Verbatim or display time description; never parsed in place of start and end; may be empty."
  }),
  job_type: Schema.String.annotations({ description: "Free-form job type; may be empty." }),
  address: Schema.String.annotations({ description: "Service address for the visit; may be empty." }),
  notes: Schema.String.annotations({ description: "Free-form booking details; may be empty." }),
  title: Schema.String.annotations({ description: "Appointment title or display label; may be empty." }),
  source: Schema.String.annotations({ description: "Attribution text; may be empty." }),
  location: Optional(Location),
  service_id: OmittedWhenEmpty("Omitted when empty.")
}

/**
 * An appointment to create. End must be after start (Operation rule 7); the
 * object has no call_id, status or caller_confirmed field.
 */
export const Appointment = Schema.Struct(appointmentFields).pipe(
  Schema.filter((a) => endAfterStart(a) || { path: ["end"], message: "end must be after start" })
).annotations({ identifier: "Appointment", title: "Appointment" })
export type Appointment = typeof Appointment.Type

const Minute = Schema.Int.pipe(Schema.between(0, 1440))

/** One weekly opening: `[day, openingMinute, closingMinute]`, day 0 is Monday. */
export const WeeklyWindow = Schema.Tuple(
  Schema.Int.pipe(Schema.between(0, 6)).annotations({ description: "Day of week, 0 = Monday." }),
  Minute.annotations({ description: "Opening minute of the day." }),
  Minute.annotations({ description: "Closing minute of the day." })
).pipe(
  Schema.filter(([, open, close]) => close > open || "closingMinute must be after openingMinute")
).annotations({ identifier: "WeeklyWindow" })
export type WeeklyWindow = typeof WeeklyWindow.Type

/** The interval and constraints of an availability request. */
export const AvailabilityWindow = Schema.Struct({
  start: Instant,
  end: Instant,
  timezone: TimeZone,
  windows: Schema.Array(WeeklyWindow).annotations({
    description: "Weekly windows; an empty array means not supplied."
  }),
  slot_minutes: Schema.NonNegativeInt.annotations({ description: "Duration in minutes; 0 when unspecified." }),
  job_type: Schema.String
}).pipe(
  Schema.filter((w) => endAfterStart(w) || { path: ["end"], message: "end must be after start" })
).annotations({ identifier: "AvailabilityWindow", title: "Availability window" })
export type AvailabilityWindow = typeof AvailabilityWindow.Type

/** One real opening; end after start. Extra slot metadata is not consumed. */
export const Slot = Schema.Struct({
  start: Instant,
  end: Instant,
  timezone: TimeZone
}).pipe(
  Schema.filter((s) => endAfterStart(s) || { path: ["end"], message: "slot end must be after its start" })
).annotations({ identifier: "Slot", title: "Slot" })
export type Slot = typeof Slot.Type
