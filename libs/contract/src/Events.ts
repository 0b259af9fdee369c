/**
 * Event API payloads: subscriptions, the perform-list preview, the Error
 * object, and the lead and booking events delivered to receivers.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Instant, TimeZone } from "./Values.js"

// ---------------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------------

/** Event values an automation platform may subscribe to. Unknown strings are accepted. */
export const KNOWN_EVENTS = ["lead", "booking", "all"] as const
/** The two kinds of event that are delivered. */
export const EventKind = Schema.Literal("lead", "booking").annotations({ identifier: "EventKind" })
export type EventKind = typeof EventKind.Type

/** The subscription `event` values that receive an event of `kind` (Events table). */
export const subscribedEventsFor = (kind: EventKind): ReadonlyArray<string> => [kind, "all"]

/** A subscription id: a UUID. */
export const SubscriptionId = Schema.UUID.pipe(Schema.brand("SubscriptionId")).annotations({
  identifier: "SubscriptionId",
  description: "Subscription identifier (UUID)."
})
export type SubscriptionId = typeof SubscriptionId.Type

/**
 * POST /subscribe body: `targetUrl` required; `event` optional, `lead` by
 * default; unknown event strings are accepted and match no fan-out.
 */
export const SubscribeRequest = Schema.Struct({
  targetUrl: Schema.String.annotations({
    description: "Public receiver URL. Not checked for reachability at registration.",
    examples: ["https://hooks.example.com/crm-relay/lead"]
  }),
  event: Schema.optionalWith(
    Schema.String.annotations({
      description: "`lead` (default), `booking` or `all`. Unknown strings are accepted but match no delivery fan-out.",
      examples: ["lead", "booking", "all"]
    }),
    { exact: true, default: () => "lead" }
  )
}).annotations({ identifier: "SubscribeRequest", title: "Subscribe request" })
export type SubscribeRequest = typeof SubscribeRequest.Type

/** 201 answer of POST /subscribe. */
export const SubscribeResponse = Schema.Struct({ id: SubscriptionId }).annotations({
  identifier: "SubscribeResponse",
  title: "Subscribe response"
})
export type SubscribeResponse = typeof SubscribeResponse.Type

// ---------------------------------------------------------------------------
// Preview
// ---------------------------------------------------------------------------

export const PERFORM_LIST_MIN = 1
export const PERFORM_LIST_MAX = 20
export const PERFORM_LIST_DEFAULT = 3

/** Clamps a parsed limit to 1..20. */
export const clampLimit = (n: number): number => Math.min(PERFORM_LIST_MAX, Math.max(PERFORM_LIST_MIN, n))

/**
 * The perform-list `limit`: an integer, parsed then clamped to 1..20
 * (`limit=100` reads 20, `limit=0` reads 1); text that is not an integer is
 * refused.
 */
export const PerformListLimit = Schema.transform(
  Schema.String.pipe(
    Schema.pattern(/^\s*[+-]?\d+\s*$/, { message: () => "limit must be an integer from 1 to 20" })
  ),
  Schema.Int.pipe(Schema.between(PERFORM_LIST_MIN, PERFORM_LIST_MAX)),
  {
    strict: true,
    decode: (text) => clampLimit(Number(text.trim())),
    encode: (n) => String(n)
  }
).annotations({
  identifier: "PerformListLimit",
  description: "Integer from 1 to 20, default 3; the parsed value is clamped.",
  jsonSchema: {
    type: "integer",
    default: PERFORM_LIST_DEFAULT,
    description: "Integer from 1 to 20, default 3; the parsed value is clamped (0 reads 1, 100 reads 20)."
  }
})

/** GET /perform-list query: only `limit` is read. */
export const PerformListParams = Schema.Struct({
  limit: Schema.optionalWith(PerformListLimit, { exact: true, default: () => PERFORM_LIST_DEFAULT })
})

/** One preview record; real previews carry only the contact's external id. */
export const PreviewRecord = Schema.Struct({
  id: Schema.String.annotations({ description: "Delivery id, or a synthetic sample id." }),
  call_id: Schema.String.annotations({ description: "Call identifier." }),
  source: Schema.String.annotations({ description: "Attribution text." }),
  contact: Schema.Struct({
    external_id: Schema.String.annotations({ description: "The CRM's id of the contact; may be empty." })
  }).annotations({ description: "Real previews contain only external_id; no name, phone or email." }),
  job_type: Schema.String.annotations({ description: "Empty on real-record previews." }),
  summary: Schema.String.annotations({ description: "Empty on real-record previews." }),
  booked: Schema.Boolean.annotations({ description: "Whether the sampled delivery has an external appointment id." })
}).annotations({ identifier: "PreviewRecord", title: "Preview record" })
export type PreviewRecord = typeof PreviewRecord.Type

/** The perform-list answer: at most `limit` records. */
export const PreviewList = Schema.Array(PreviewRecord).pipe(Schema.maxItems(PERFORM_LIST_MAX)).annotations({
  identifier: "PreviewList"
})

/** The synthetic example returned when the account has no delivery records. */
export const SAMPLE_PREVIEW: PreviewRecord = {
  id: "sample-00000000-0000-4000-8000-000000000000",
  call_id: "sample-call",
  source: "Sample receptionist (phone)",
  contact: { external_id: "sample-contact" },
  job_type: "Sample job",
  summary: "Synthetic example: the account has no deliveries yet.",
  booked: false
}

// ---------------------------------------------------------------------------
// The Error object
// ---------------------------------------------------------------------------

/** The Error object's encoded form: one sentence, and retryAfterSeconds only on 429. */
export const ErrorObject = Schema.Struct({
  error: Schema.String.annotations({ description: "One sentence." }),
  retryAfterSeconds: Schema.optionalWith(
    Schema.NonNegativeInt.annotations({ description: "Only on the rate-limit (429) response; whole seconds." }),
    { exact: true }
  )
}).annotations({ identifier: "ErrorObject", title: "Error object" })
export type ErrorObject = typeof ErrorObject.Type

const ErrorFields = { error: Schema.String }
const RateLimitedFields = { error: Schema.String, retryAfterSeconds: Schema.NonNegativeInt }

/**
 * The wire form of an error class: exactly the Error object (its fields
 * without `_tag`), answered with `status`. Any API speaking the Error object
 * declares its own errors with it; `identifier` names the OpenAPI component
 * (`Error<status>` by default).
 */
export const errorObject = <Self, Tag extends string, F extends Schema.Struct.Fields>(
  cls: Schema.TaggedErrorClass<Self, Tag, { readonly _tag: Schema.tag<Tag> } & F>,
  status: number,
  description: string,
  identifier = `Error${status}`
) => {
  const { _tag: _, ...fields } = cls.fields
  return Schema.transform(Schema.Struct(fields), cls, {
    strict: false,
    decode: (body) => ({ ...body, _tag: cls._tag }),
    encode: (encoded) => {
      const { _tag: _, ...body }: Record<string, unknown> = encoded
      return body
    }
  }).annotations({ ...HttpApiSchema.annotations({ status }), identifier, description })
}

/** 400: the request could not be accepted. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", ErrorFields) {
  static readonly wire = errorObject(this, 400, "The request could not be accepted; fix the body.")
}
/** 401: the key is not valid. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", ErrorFields) {
  static readonly wire = errorObject(this, 401, "The key is not valid; correct or rotate it.")
}
/** 404: not a supported endpoint, or an unknown, removed or foreign subscription id. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", ErrorFields) {
  static readonly wire = errorObject(this, 404, "Not found: check the endpoint, the id and the account.")
}
/** 429: rate limit exceeded; the answer carries `Retry-After` and `retryAfterSeconds`. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", RateLimitedFields) {
  static readonly wire = errorObject(
    this,
    429,
    "Rate limit exceeded (60 requests per key per minute); wait `Retry-After` seconds."
  )
}
/** 502: the service could not be reached (for example its database). */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", ErrorFields) {
  static readonly wire = errorObject(this, 502, "The service could not be reached; retry reads later.")
}

/**
 * 413: the request body is over the server's cap (RFC 9110 §15.5.14), answered before it is read, with
 * `Connection: close`; on every route, so a client that sent too much always reads why.
 */
export class TooLarge extends Schema.TaggedError<TooLarge>()("TooLarge", ErrorFields) {
  static readonly wire = errorObject(this, 413, "The request body is larger than the server accepts; send a smaller body.")
}

// ---------------------------------------------------------------------------
// Events delivered to receivers
// ---------------------------------------------------------------------------

/** The contact in a delivered event. */
export const EventContact = Schema.Struct({
  external_id: Schema.String,
  full_name: Schema.String,
  first_name: Schema.String,
  last_name: Schema.String,
  phones: Schema.Array(Schema.String),
  emails: Schema.Array(Schema.String),
  address: Schema.String,
  postal_code: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "EventContact" })
export type EventContact = typeof EventContact.Type

const eventFields = {
  id: Schema.String.annotations({ description: "Delivery event id; the same as the webhook-id header." }),
  call_id: Schema.String,
  source: Schema.String,
  contact: EventContact,
  job_type: Schema.String,
  summary: Schema.String,
  created_at: Instant
}

/** A `lead` event: a captured lead was pushed. */
export const LeadEvent = Schema.Struct({
  ...eventFields,
  event: Schema.Literal("lead"),
  booked: Schema.Literal(false)
}).annotations({ identifier: "LeadEvent", title: "Lead event" })
export type LeadEvent = typeof LeadEvent.Type

/** Known appointment statuses of a booking event. */
export const AppointmentStatus = Schema.Literal("requested", "scheduled").annotations({
  identifier: "AppointmentStatus",
  description: "`requested`: the business needs to confirm. `scheduled`: the canonical appointment was marked scheduled."
})
export type AppointmentStatus = typeof AppointmentStatus.Type

/** The appointment in a booking event. */
export const EventAppointment = Schema.Struct({
  external_id: Schema.String.annotations({ description: "The CRM's appointment id; empty when none was created." }),
  status: AppointmentStatus,
  start: Instant,
  end: Instant,
  timezone: TimeZone,
  slot_text: Schema.String,
  title: Schema.String,
  job_type: Schema.String,
  address: Schema.String
}).annotations({ identifier: "EventAppointment" })
export type EventAppointment = typeof EventAppointment.Type

/** A `booking` event: a booked call, sent instead of a lead event. */
export const BookingEvent = Schema.Struct({
  ...eventFields,
  event: Schema.Literal("booking"),
  booked: Schema.Boolean,
  appointment: EventAppointment
}).annotations({ identifier: "BookingEvent", title: "Booking event" })
export type BookingEvent = typeof BookingEvent.Type

/** Either event as delivered. */
export const DeliveredEvent = Schema.Union(LeadEvent, BookingEvent).annotations({ identifier: "DeliveredEvent" })
export type DeliveredEvent = typeof DeliveredEvent.Type
