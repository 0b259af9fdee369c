/**
 * The Event API announcement of a call: the lead or booking event built from
 * the stored outcome and what the CRM push produced (or did not).
 *
 * `contact.external_id` is the CRM's id from the upsert receipt (else the
 * in-call one, else ""); a booking's appointment is `scheduled` with the
 * CRM's appointment id when one was booked (in-call or post-call), otherwise
 * `requested` with "".
 */
import type { Events } from "@crm-relay/contract"
import { Operations } from "@crm-relay/contract"
import type { StoredStep } from "@crm-relay/contract/Calls"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { Either, Option, type ParseResult, Schema } from "effect"
import * as Fanout from "./Fanout.js"

const decodeUpsert = Schema.decodeUnknownOption(Operations.ContactsUpsertResponse)

/** What a CRM push produced, as the event reports it. */
export interface PushResult {
  /** The CRM's contact id (from the upsert receipt), or the in-call one, or "". */
  readonly contactExternalId: string
  /** The CRM's lead id, "" when no lead was created. */
  readonly leadExternalId: string
  /** For a booking: `scheduled` with the appointment id, or `requested` with "". */
  readonly appointment: Option.Option<{ readonly status: "scheduled" | "requested"; readonly externalId: string }>
}

/** What the event says when nothing was pushed (no bridge, demo, push off, or a push that stopped). */
export const withoutPush = (outcome: CallOutcome, steps: ReadonlyArray<StoredStep> = []): PushResult => {
  const upserted = Option.flatMap(
    Option.fromNullable(steps.find((s) => s.operation === "contacts.upsert" && s.outcome === "receipt")),
    (s) => decodeUpsert(s.receipt)
  )
  const booking = outcome.booking
  return {
    contactExternalId: Option.match(upserted, {
      onNone: () => booking?.contact_external_id ?? "",
      onSome: (r) => r.id
    }),
    leadExternalId: "",
    appointment: booking === undefined
      ? Option.none()
      : booking.status === "booked"
      ? Option.some({ status: "scheduled", externalId: booking.appointment_external_id ?? "" })
      : Option.some({ status: "requested", externalId: "" })
  }
}

/** The event of call `callId` with outcome `outcome` after `result`. */
export const eventOf = (callId: string, outcome: CallOutcome, result: PushResult): Fanout.EventInput => {
  const caller = outcome.caller
  const contact: Events.EventContact = {
    external_id: result.contactExternalId,
    full_name: caller.full_name,
    first_name: caller.first_name,
    last_name: caller.last_name,
    phones: caller.phones,
    emails: caller.emails,
    address: caller.address,
    ...(caller.postal_code !== undefined ? { postal_code: caller.postal_code } : {})
  }
  const booking = outcome.booking
  const jobType = outcome.lead.job_type.trim() === "" && booking !== undefined ? booking.job_type : outcome.lead.job_type
  return {
    accountId: outcome.account_id,
    callId,
    source: outcome.source,
    contact,
    jobType,
    summary: outcome.lead.summary,
    appointment: booking === undefined
      ? Option.none()
      : Option.some({
        external_id: Option.match(result.appointment, { onNone: () => "", onSome: (a) => a.externalId }),
        status: Option.match(result.appointment, { onNone: () => "requested" as const, onSome: (a) => a.status }),
        start: booking.start,
        end: booking.end,
        timezone: booking.timezone,
        slot_text: booking.slot_text,
        title: booking.title,
        job_type: booking.job_type,
        address: booking.address
      })
  }
}

const decodeStored = Schema.decodeUnknownEither(CallOutcome)

/**
 * The body a delivery of an outcome's own event sends (store migration 0020): the event of call `callId`
 * announced without a push (the intake decided so), from the outcome as stored (`outcome`, its encoded JSON
 * value), under delivery id `id`, created at `createdAt`. The intake that writes such deliveries builds the
 * same event from the same outcome, so the bytes are the same whoever renders them, on every attempt.
 */
export const renderBody = (
  callId: string,
  outcome: unknown,
  id: string,
  createdAt: Date
): Either.Either<string, ParseResult.ParseError> =>
  Either.map(decodeStored(outcome), (outcome) => Fanout.body(eventOf(callId, outcome, withoutPush(outcome)), id, createdAt))
