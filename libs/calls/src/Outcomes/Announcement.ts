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
import type { Fanout } from "@crm-relay/events"
import { Option, Schema } from "effect"
import type { PushResult } from "../CrmPush/Steps.js"
import type { StoredStep } from "../CrmPush/Receipts.js"
import type { CallOutcome } from "@crm-relay/contract/CallOutcome"

const decodeUpsert = Schema.decodeUnknownOption(Operations.ContactsUpsertResponse)

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
