/**
 * The write level (`--writes`, on a test tenant): upsert creates, matches
 * and replays; leads and their replay; a booking of an offered slot, its
 * replay, the 409 of a taken slot and the slot leaving availability. Every
 * record it creates is labelled as a conformance test. Each run leaves its
 * booking behind, so the slot is the first free one in start order, looked
 * for week by week: earlier runs and the day it runs change which slot, never
 * a verdict.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, Schema } from "effect"
import { Operations, Values } from "@crm-relay/contract"
import type { Permanent } from "../../BridgeError.js"
import * as Receipts from "../../Receipts.js"
import type { Check, Outcome, Setup, Slot, State } from "./check.js"
import {
  advertises,
  common,
  describeValue,
  fail,
  freshKey,
  isNonBlank,
  isRecord,
  notAdvertised,
  pass,
  receiptOf,
  send,
  skip,
  transportCheckOf,
  usableSlots,
  warn,
  windowFor
} from "./check.js"
import { expectingRefusal } from "./recorder.js"

const LABEL = "crm-relay conformance test (safe to delete)"

const testContact = (email: string, fullName: string) => ({
  full_name: fullName,
  first_name: "Conformance",
  last_name: "Test",
  address: "",
  source: LABEL,
  call_id: "",
  phones: [],
  emails: [email],
  tags: ["crm-relay-conformance-test"]
})

const idAndFlag = (r: Record<string, unknown>): Either.Either<{ id: string; isNew: boolean; raw: Record<string, unknown> }, Outcome> => {
  if (!isNonBlank(r["id"])) return Either.left(fail(`id is ${describeValue(r["id"])}, not a nonblank string.`))
  const isNew = r["is_new"]
  if (typeof isNew !== "boolean") return Either.left(fail(`is_new is ${describeValue(isNew)}, not a real boolean.`))
  return Either.right({ id: r["id"], isNew, raw: r })
}

/**
 * The client's own receipt check (the one every real call passes through): a receipt this check accepts
 * must also be one crm-relay believes. Its message names fields, never the bridge's values.
 */
const believe = (checked: Either.Either<unknown, Permanent>): Outcome | undefined =>
  Either.isRight(checked) ? undefined : fail(checked.left.message)

const decodeAppointmentRequest = Schema.decodeUnknownEither(Operations.AppointmentsCreateRequest)

const needs = (what: string, check: string) => skip(`Needs ${what} (see ${check}).`)

/** Weeks after the first window the booking looks for a free slot in, when earlier runs (or the calendar) left none. */
const LOOK_AHEAD_WEEKS = 12

/**
 * The first free slot, in start order: the read-only window's, else the first of a later week's. Every run
 * books one and cannot delete it; without looking further a calendar drained by earlier runs would turn
 * the booking checks into skips.
 */
const slotToBook = (setup: Setup, state: State) =>
  Effect.gen(function*() {
    const first = state.slots[0]
    if (first !== undefined) {
      state.bookingWindow = state.window
      return first
    }
    for (let week = 1; week <= LOOK_AHEAD_WEEKS; week++) {
      const window = windowFor(setup.now, week)
      const receipt = receiptOf(setup, yield* send(setup, "availability.list", { ...common(setup), window }))
      if (Either.isLeft(receipt)) return undefined
      const slots = Array.isArray(receipt.right["slots"]) ? usableSlots(receipt.right["slots"]) : []
      if (slots[0] !== undefined) {
        state.bookingWindow = window
        return slots[0]
      }
    }
    return undefined
  })

export const writes = (): ReadonlyArray<Check> => [
  {
    id: "contacts.upsert.creates",
    level: "writes",
    section: "Operation rules 3",
    rule: "contacts.upsert: match by phone or email identity before creating. is_new as a string (for example \"false\") is invalid.",
    hint: "Create the contact when no identity matches and answer {\"id\": \"…\", \"is_new\": true} with a JSON boolean.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const email = `crm-relay-conformance-${randomBytes(8).toString("hex")}@example.invalid`
        const key = freshKey()
        const body = { ...common(setup), contact: testContact(email, LABEL), idempotency_key: key }
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", body, { key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        if (!receipt.right.isNew) return fail("A contact with a new identity was answered is_new: false (matched something).")
        const believed = believe(Receipts.contactsUpsert(receipt.right.raw, 200))
        if (believed !== undefined) return believed
        state.contact = { id: receipt.right.id, key, body, contact: body.contact }
        return pass("A new identity was created: is_new is the boolean true.")
      })
  },
  {
    id: "contacts.upsert.matches",
    level: "writes",
    section: "Contact",
    rule: "A contact upsert needs at least one usable phone or email and must match an existing identity before creating a duplicate.",
    hint: "Look the contact up by phone digits and email before creating; answer is_new: false with the existing id.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const created = state.contact
        if (created === undefined) return needs("a created contact", "contacts.upsert.creates")
        const key = freshKey()
        const original = created.contact
        const body = { ...common(setup), contact: { ...original, full_name: `${LABEL}, updated` }, idempotency_key: key }
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", body, { key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        if (receipt.right.isNew) return fail("The same email under a new key created another contact (is_new: true).")
        return receipt.right.id === created.id
          ? pass("The same email under a new key matched the contact (is_new: false, same id).")
          : fail("The same email under a new key answered is_new: false but another id.")
      })
  },
  {
    id: "contacts.upsert.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Store the receipt under the Idempotency-Key with the write; answer a replayed key with that receipt.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const created = state.contact
        if (created === undefined) return needs("a created contact", "contacts.upsert.creates")
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", created.body, { key: created.key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right.id === created.id && receipt.right.isNew
          ? pass("Replaying the first key answered the original receipt (same id, is_new: true).")
          : fail(`Replaying the first key answered ${receipt.right.id === created.id ? "the same id" : "another id"} with is_new: ${receipt.right.isNew}, not the original receipt.`)
      })
  },
  {
    id: "leads.create.receipt",
    level: "writes",
    section: "Operation rules 6",
    rule: "leads.create: create, or return the existing lead for the same idempotency key. A generic acknowledgement such as ok:true is not a receipt.",
    hint: "Answer leads.create with {\"id\": \"…\"}, the lead's durable id.",
    run: (setup, state) =>
      Effect.gen(function*() {
        if (!advertises(state, "leads.create")) return notAdvertised("leads.create")
        if (state.contact === undefined) return needs("a created contact", "contacts.upsert.creates")
        const key = freshKey()
        const body = {
          ...common(setup),
          lead: {
            job_type: "conformance test",
            summary: LABEL,
            notes: `${LABEL}: created by crm-relay bridge check --writes.`,
            urgency: "",
            source: LABEL,
            call_id: "",
            contact: state.contact.contact
          },
          idempotency_key: key
        }
        const receipt = receiptOf(setup, yield* send(setup, "leads.create", body, { key }))
        if (Either.isLeft(receipt)) return receipt.left
        if (!isNonBlank(receipt.right["id"])) return fail(`id is ${describeValue(receipt.right["id"])}, not a nonblank string.`)
        const believed = believe(Receipts.leadsCreate(receipt.right, 200))
        if (believed !== undefined) return believed
        state.lead = { id: receipt.right["id"], key, body }
        return pass("The lead was created with a nonblank id.")
      })
  },
  {
    id: "leads.create.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Answer a replayed leads.create key with the original lead's id; create nothing.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const lead = state.lead
        if (lead === undefined) return needs("a created lead", "leads.create.receipt")
        const receipt = receiptOf(setup, yield* send(setup, "leads.create", lead.body, { key: lead.key }))
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right["id"] === lead.id
          ? pass("Replaying the key answered the original lead id.")
          : fail("Replaying the key answered another id: a second lead was created.")
      })
  },
  {
    id: "appointments.create.confirmed",
    level: "writes",
    section: "Operation rules 5",
    rule: "An unconfirmed result, a shifted time, an empty ID or a missing timestamp is a failed booking. The receipt start and end must equal the requested instants exactly.",
    hint: "Book the requested slot and answer {id, confirmed: true, start, end, timezone} echoing the requested instants.",
    run: (setup, state) =>
      Effect.gen(function*() {
        if (!advertises(state, "appointments.create")) return notAdvertised("appointments.create")
        if (!advertises(state, "availability.list")) return skip("Needs availability.list to choose an offered slot.")
        if (state.contact === undefined) return needs("a created contact", "contacts.upsert.creates")
        if (state.window === undefined) return needs("an availability answer", "availability.at_most_50")
        const slot: Slot | undefined = yield* slotToBook(setup, state)
        if (slot === undefined) return needs(`a free slot in the next ${LOOK_AHEAD_WEEKS + 1} weeks`, "availability.at_most_50")
        const key = freshKey()
        const body = {
          ...common(setup),
          appointment: {
            contact_external_id: state.contact.id,
            timezone: slot.timezone,
            start: slot.start,
            end: slot.end,
            slot_text: "",
            job_type: "conformance test",
            address: "",
            notes: `${LABEL}: created by crm-relay bridge check --writes.`,
            title: LABEL,
            source: LABEL
          },
          idempotency_key: key
        }
        const receipt = receiptOf(setup, yield* send(setup, "appointments.create", body, { key }))
        if (Either.isLeft(receipt)) return receipt.left
        const r = receipt.right
        if (r["confirmed"] !== true) return fail(`confirmed is ${describeValue(r["confirmed"])}, not true.`)
        if (!isNonBlank(r["id"])) return fail(`id is ${describeValue(r["id"])}, not a nonblank string.`)
        const same = (got: unknown, wanted: Values.Instant) => {
          const nanos = typeof got === "string" ? Values.parseInstant(got) : undefined
          return nanos !== undefined && nanos === Values.instantNanos(wanted)
        }
        if (!same(r["start"], slot.start) || !same(r["end"], slot.end)) {
          return fail(`The receipt's start/end (${describeValue(r["start"])}, ${describeValue(r["end"])}) differ from the requested ${slot.start} – ${slot.end}.`)
        }
        if (typeof r["timezone"] !== "string" || !Values.isIanaTimeZone(r["timezone"])) {
          return fail(`timezone is ${describeValue(r["timezone"])}, not an IANA name.`)
        }
        const request = decodeAppointmentRequest(body)
        if (Either.isLeft(request)) return yield* Effect.dieMessage("the conformance check built an invalid appointment request")
        const believed = believe(Receipts.appointmentsCreate(request.right, r, 200))
        if (believed !== undefined) return believed
        state.booking = { id: r["id"], key, body, start: slot.start, end: slot.end }
        return pass(`The offered slot ${slot.start} – ${slot.end} was booked and confirmed with exactly those instants.`)
      })
  },
  {
    id: "appointments.create.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Answer a replayed appointments.create key with the original receipt, not 409 and not a new booking.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        const receipt = receiptOf(setup, yield* send(setup, "appointments.create", booking.body, { key: booking.key }))
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right["id"] === booking.id && receipt.right["confirmed"] === true
          ? pass("Replaying the key answered the original booking.")
          : fail("Replaying the key did not answer the original booking's receipt.")
      })
  },
  {
    id: "appointments.create.conflict",
    level: "writes",
    section: "Operation rules 5",
    rule: "Return HTTP 409 when the slot is taken; never a success receipt for a different time.",
    hint: "Check capacity in the same transaction as the booking and answer 409 when the slot is taken.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        const key = freshKey()
        const result = yield* expectingRefusal(send(setup, "appointments.create", { ...booking.body, idempotency_key: key }, { key }))
        if (Either.isRight(result)) return fail(`Booking the taken slot under another key was answered ${result.right.status}, not 409.`)
        const error = result.left
        if (error._tag === "Conflict") {
          const last = (yield* setup.exchanges).at(-1)
          return pass(
            last?.response?.status === 409
              ? "Booking the taken slot under another key was answered 409."
              : "Booking the taken slot under another key was refused with a tool error naming status 409."
          )
        }
        if (error._tag === "Permanent" && error.kind === "tool_error") {
          // The contract does not say how an MCP bridge signals a 409: a bare tool error is a refusal crm-relay reads as permanent.
          return warn(
            "Booking the taken slot under another key was refused with a bare tool error (isError: true naming no status, " +
              "the official MCP SDK's default): crm-relay reads it as a permanent failure with no booking, but cannot tell a taken slot from another refusal.",
            "Name the status in the tool error, {isError: true, structuredContent: {status: 409}, content: [...]}, or answer HTTP 409, so a taken slot reads as a conflict."
          )
        }
        // Nothing else judges the answer to a request meant to be refused, except the framing and the id echo.
        const other = transportCheckOf(setup, error)
        return other === undefined || other === "mcp.tool_result"
          ? fail(`Booking the taken slot was not refused as 409: ${error.message}`)
          : skip(`The answer broke a transport rule, reported by ${other}: ${error.message}`)
      })
  },
  {
    id: "appointments.create.closes_availability",
    level: "writes",
    section: "Operation rules 1",
    rule: "When availability.list is advertised, appointments.create must also be implemented and booking_closes_availability must be true for the same calendar.",
    hint: "Read availability from the same calendar the booking writes to, so a booked slot is no longer offered.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        if (!state.closesAvailability) return skip("The bridge does not declare booking_closes_availability.")
        const window = state.bookingWindow ?? state.window!
        const receipt = receiptOf(setup, yield* send(setup, "availability.list", { ...common(setup), window }))
        if (Either.isLeft(receipt)) return receipt.left
        const slots = Array.isArray(receipt.right["slots"]) ? receipt.right["slots"] : []
        const appointment = booking
        const still = slots.some((s: unknown) => {
          if (!isRecord(s) || typeof s["start"] !== "string") return false
          return Values.parseInstant(s["start"]) === Values.instantNanos(appointment.start)
        })
        return still ? fail("The booked slot is still offered by availability.list.") : pass("The booked slot is no longer offered.")
      })
  }
]
