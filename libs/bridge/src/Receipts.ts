/**
 * Receipt checks (Operation rules 1–6): only an answer that is a valid
 * receipt for the request that was sent becomes a success. Everything else
 * is a Permanent `invalid_receipt` — never a confirmed write.
 */
import { Either, ParseResult, Schema } from "effect"
import { Operations, Values } from "@crm-relay/contract"
import { Permanent } from "./BridgeError.js"

type Op = Operations.OperationName

const ISSUE_WORDS: Record<string, string> = {
  Missing: "is missing",
  Type: "has the wrong type",
  Refinement: "breaks a contract rule",
  Unexpected: "is not allowed",
  Forbidden: "is not allowed",
  Transformation: "cannot be read"
}

// Names where the answer failed, never the answer's values: the message must
// not carry remote text.
const describeIssues = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const named = issues.slice(0, 3).map((issue) => {
    const path = issue.path.map(String).join(".")
    return `${path === "" ? "the body" : path} ${ISSUE_WORDS[issue._tag] ?? "is invalid"}`
  })
  const more = issues.length > 3 ? ` and ${issues.length - 3} more` : ""
  return named.join(", ") + more
}

/** A Permanent invalid-receipt failure of `operation`, with a sentence of our own. */
export const invalidReceipt = (operation: Op, status: number | null, why: string): Permanent =>
  new Permanent({
    operation,
    status,
    kind: "invalid_receipt",
    message: `The bridge's answer to ${operation} is not a valid receipt: ${why}.`
  })

const decoder = <A, I>(schema: Schema.Schema<A, I>, operation: Op) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "ignore" })
  return (answer: unknown, status: number | null): Either.Either<A, Permanent> =>
    Either.mapLeft(decode(answer), (error) => invalidReceipt(operation, status, describeIssues(error)))
}

const decodeCapabilities = decoder(Operations.CapabilitiesResponse, "capabilities")
const decodeSearch = decoder(Operations.ContactsSearchResponse, "contacts.search")
const decodeUpsert = decoder(Operations.ContactsUpsertResponse, "contacts.upsert")
const decodeAvailability = decoder(Operations.AvailabilityListResponse, "availability.list")
const decodeAppointment = decoder(Operations.AppointmentsCreateResponse, "appointments.create")
const decodeLead = decoder(Operations.LeadsCreateResponse, "leads.create")

/** Operation rule 1: the exact version, known names, contacts.upsert plus a write, availability only with booking. */
export const capabilities = (answer: unknown, status: number | null) => decodeCapabilities(answer, status)

/** Operation rule 2: `{contact: null}` or `{contact: {id}}`; only the id is kept, nothing else is trusted. */
export const contactsSearch = (answer: unknown, status: number | null) =>
  Either.map(
    decodeSearch(answer, status),
    (r): Operations.ContactsSearchResponse => ({ contact: r.contact === null ? null : { id: r.contact.id } })
  )

/** Operation rule 3: a nonblank id and `is_new` as a real boolean. */
export const contactsUpsert = (answer: unknown, status: number | null) =>
  Either.map(decodeUpsert(answer, status), (r): Operations.ContactsUpsertResponse => ({ id: r.id, is_new: r.is_new }))

/**
 * Operation rule 4: at most 50 slots, each with end after start and inside
 * the requested interval; then sorted and de-duplicated by instant.
 */
export const availabilityList = (
  request: Operations.AvailabilityListRequest,
  answer: unknown,
  status: number | null
): Either.Either<Operations.AvailabilityListResponse, Permanent> =>
  Either.flatMap(decodeAvailability(answer, status), ({ slots }) => {
    const from = Values.instantNanos(request.window.start)
    const to = Values.instantNanos(request.window.end)
    const timed = slots.map((slot) => ({
      slot,
      start: Values.instantNanos(slot.start),
      end: Values.instantNanos(slot.end)
    }))
    const outside = timed.findIndex((t) => t.start < from || t.end > to)
    if (outside >= 0) {
      return Either.left(
        invalidReceipt("availability.list", status, `slots.${outside} lies outside the requested interval`)
      )
    }
    timed.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.end < b.end ? -1 : a.end > b.end ? 1 : 0))
    const unique = timed.filter((t, i) => {
      const previous = timed[i - 1]
      return previous === undefined || previous.start !== t.start || previous.end !== t.end
    })
    return Either.right({ slots: unique.map((t) => ({ start: t.slot.start, end: t.slot.end, timezone: t.slot.timezone })) })
  })

/**
 * Operation rule 5: confirmed true, a nonblank id, a valid zone, and start and
 * end equal to the requested instants; anything else is a failed booking.
 */
export const appointmentsCreate = (
  request: Operations.AppointmentsCreateRequest,
  answer: unknown,
  status: number | null
): Either.Either<Operations.AppointmentsCreateResponse, Permanent> =>
  Either.flatMap(decodeAppointment(answer, status), (receipt) =>
    Values.sameInstant(receipt.start, request.appointment.start) &&
      Values.sameInstant(receipt.end, request.appointment.end)
      ? Either.right({
        id: receipt.id,
        confirmed: receipt.confirmed,
        start: receipt.start,
        end: receipt.end,
        timezone: receipt.timezone
      })
      : Either.left(
        invalidReceipt("appointments.create", status, "the booked time differs from the requested instants, so the booking failed")
      ))

/** Operation rule 6: a real receipt with a nonblank id; `{ok: true}` is not one. */
export const leadsCreate = (answer: unknown, status: number | null) =>
  Either.map(decodeLead(answer, status), (r): Operations.LeadsCreateResponse => ({ id: r.id }))
