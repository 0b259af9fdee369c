/**
 * The bridge inputs of a CRM push, derived only from the stored outcome (and
 * receipts already stored), so every run of a job sends the same writes and
 * the client derives the same idempotency keys (Idempotency rule 2).
 */
import type { ContactInput, LeadInput, AppointmentInput } from "@crm-relay/bridge"
import { Resources } from "@crm-relay/contract"
import { Option, Schema } from "effect"
import type { Booking, CallOutcome } from "@crm-relay/contract/CallOutcome"

const decodeContact = Schema.decodeUnknownOption(Resources.Contact)

/** The caller as a svc.crm.v1 Contact, attributed to the call. */
export const contact = (callId: string, outcome: CallOutcome): ContactInput => ({
  full_name: outcome.caller.full_name,
  first_name: outcome.caller.first_name,
  last_name: outcome.caller.last_name,
  address: outcome.caller.address,
  source: outcome.source,
  call_id: callId,
  phones: outcome.caller.phones,
  emails: outcome.caller.emails,
  tags: outcome.tags,
  ...(outcome.caller.postal_code !== undefined ? { postal_code: outcome.caller.postal_code } : {})
})

/**
 * Whether contacts.upsert can be sent: it needs at least one usable phone or
 * email (Resources: "A contact upsert needs at least one usable phone or
 * email"); without one the lead still carries the caller.
 */
export const canUpsert = (input: ContactInput): boolean =>
  Option.exists(decodeContact(input), Resources.hasUsableIdentity)

/** The requested appointment in words, for a lead that carries the request instead of a booking. */
export const describeRequest = (booking: Booking): string => {
  const when = booking.slot_text.trim() !== "" ? `${booking.slot_text} (${booking.start} to ${booking.end}, ${booking.timezone})` : `${booking.start} to ${booking.end} (${booking.timezone})`
  const parts = [
    `Requested appointment: ${when}.`,
    booking.title.trim() !== "" ? `Title: ${booking.title}.` : "",
    booking.job_type.trim() !== "" ? `Job type: ${booking.job_type}.` : "",
    booking.address.trim() !== "" ? `Address: ${booking.address}.` : "",
    booking.notes.trim() !== "" ? `Booking notes: ${booking.notes}` : ""
  ]
  return parts.filter((p) => p !== "").join("\n")
}

/**
 * The lead of the call. With `request`, the lead carries a booking that was
 * not confirmed: the requested time and details are added to its notes (and
 * to an empty summary). Its key (call id and job type) does not change.
 */
export const lead = (callId: string, outcome: CallOutcome, request?: Booking): LeadInput => {
  const base = outcome.lead
  const jobType = base.job_type.trim() === "" && request !== undefined ? request.job_type : base.job_type
  const requestText = request === undefined ? "" : describeRequest(request)
  const notes = requestText === "" ? base.notes : base.notes.trim() === "" ? requestText : `${base.notes}\n\n${requestText}`
  const summary = request === undefined || base.summary.trim() !== ""
    ? base.summary
    : `Appointment requested: ${request.slot_text.trim() !== "" ? request.slot_text : request.start}`
  return {
    job_type: jobType,
    summary,
    notes,
    urgency: base.urgency,
    source: outcome.source,
    call_id: callId,
    contact: contact(callId, outcome),
    ...(outcome.location !== undefined ? { location: outcome.location } : {})
  }
}

/** The appointment to create for a requested booking, for the contact the bridge returned. */
export const appointment = (outcome: CallOutcome, booking: Booking, contactExternalId: string): AppointmentInput => ({
  contact_external_id: contactExternalId,
  timezone: booking.timezone,
  start: booking.start,
  end: booking.end,
  slot_text: booking.slot_text,
  job_type: booking.job_type,
  address: booking.address,
  notes: booking.notes,
  title: booking.title,
  source: outcome.source,
  ...(outcome.location !== undefined ? { location: outcome.location } : {}),
  ...(booking.service_id !== undefined ? { service_id: booking.service_id } : {})
})
