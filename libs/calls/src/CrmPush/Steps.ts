/**
 * The steps of one CRM push run against a bridge client: `contacts.upsert`,
 * then `leads.create` — or, for a `requested` booking on a bridge that
 * supports it, `appointments.create` (confirmed → `scheduled`; 409 or any
 * other refusal → a lead carrying the request, `requested`; so too when it
 * failed transiently until the retry schedule ended: see `bookingGivenUp`).
 *
 * Each step is one exchange (no in-memory retry: the job is rescheduled by
 * the worker on a Transient failure). A step whose receipt is already stored
 * is not sent again; every new receipt is stored before the next step, with
 * the idempotency key the client sent (derived from the stored outcome, so
 * identical on every run).
 */
import type { BridgeClient, BridgeError, Transient } from "@crm-relay/bridge"
import { IdempotencyKeys } from "@crm-relay/bridge"
import { Operations, Resources } from "@crm-relay/contract"
import { Effect, Either, Option, Schema } from "effect"
import type { Booking, CallOutcome } from "@crm-relay/contract/CallOutcome"
import type { Announcement } from "@crm-relay/events"
import * as Inputs from "../internal/pushInputs.js"
import type { StoredStep } from "./Receipts.js"

/** The bridge does not offer an operation the push needs (its stored capabilities say so). */
export class NotSupported extends Schema.TaggedError<NotSupported>()("NotSupported", {
  operation: Operations.OperationName,
  message: Schema.String
}) {}

/** Why a push stopped: the bridge's closed union, or a missing operation. */
export type PushFailure = BridgeError | NotSupported

/** What a finished push produced, for the event. */
/** What a push produced, as its event reports it (the event is built in @crm-relay/events). */
export type PushResult = Announcement.PushResult

/** Where steps are read from and written to (the receipts of one job). */
export interface StepStore {
  readonly stored: ReadonlyArray<StoredStep>
  readonly put: (step: StoredStep) => Effect.Effect<void>
}

/** A job's input: the call, its stored outcome, and the bridge's stored capabilities (none: unknown). */
export interface PushInput {
  readonly callId: string
  readonly outcome: CallOutcome
  readonly capabilities: Option.Option<ReadonlyArray<string>>
}

const decodeUpsert = Schema.decodeUnknownOption(Operations.ContactsUpsertResponse)
const decodeAppointment = Schema.decodeUnknownOption(Operations.AppointmentsCreateResponse)
const decodeLead = Schema.decodeUnknownOption(Operations.LeadsCreateResponse)
const encodeUpsert = Schema.encodeSync(Operations.ContactsUpsertResponse)
const encodeAppointment = Schema.encodeSync(Operations.AppointmentsCreateResponse)
const encodeLead = Schema.encodeSync(Operations.LeadsCreateResponse)

// The key the client derives for the same input ("" when the input is invalid: the client then refuses it unsent).
const keyOf = <A, I>(schema: Schema.Schema<A, I>, key: (tenantId: string, resource: A) => string) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (tenantId: string, input: I): string =>
    Either.match(decode(input), { onLeft: () => "", onRight: (resource) => key(tenantId, resource) })
}
const contactKey = keyOf(Resources.Contact, IdempotencyKeys.contactKey)
const appointmentKey = keyOf(Resources.Appointment, IdempotencyKeys.appointmentKey)
const leadKey = keyOf(Resources.Lead, IdempotencyKeys.leadKey)

// The appointment a requested booking asks for, and the key the client derives for it.
const appointmentRequest = (input: PushInput, booking: Booking, tenantId: string, contactExternalId: string) => {
  const appointment = Inputs.appointment(input.outcome, booking, contactExternalId)
  return { appointment, key: appointmentKey(tenantId, appointment) }
}

/**
 * A requested booking whose appointments.create failed transiently until the
 * retry schedule ended is not lost with the job: this is its refusal to store,
 * after which the next run writes the lead carrying the request (as after a
 * 409). None when the push holds no requested booking to give up.
 */
export const bookingGivenUp = (
  input: PushInput,
  tenantId: string,
  stored: ReadonlyArray<StoredStep>,
  error: Transient
): Option.Option<StoredStep> => {
  const booking = input.outcome.booking
  if (booking?.status !== "requested") return Option.none()
  const upserted = Option.flatMap(
    Option.fromNullable(stored.find((s) => s.operation === "contacts.upsert" && s.outcome === "receipt")),
    (s) => decodeUpsert(s.receipt)
  )
  const contactExternalId = Option.match(upserted, { onNone: () => booking.contact_external_id ?? "", onSome: (r) => r.id })
  if (contactExternalId === "") return Option.none()
  return Option.some({
    operation: "appointments.create",
    idempotency_key: appointmentRequest(input, booking, tenantId, contactExternalId).key,
    outcome: "refused",
    receipt: { error: "Transient", status: error.status, message: error.message, retry: "the retry schedule ended" }
  })
}

const supports = (input: PushInput, operation: Operations.OperationName): boolean =>
  Option.match(input.capabilities, { onNone: () => true, onSome: (ops) => ops.includes(operation) })

/** Runs the push of `input` with `client`, resuming after the steps stored in `store`. */
export const run = (
  input: PushInput,
  client: BridgeClient["Type"],
  store: StepStore
): Effect.Effect<PushResult, PushFailure> =>
  Effect.gen(function*() {
    const { callId, outcome } = input
    const tenantId = client.tenantId
    // Booked in-call: the appointment exists; nothing more is written.
    if (outcome.booking?.status === "booked") {
      return {
        contactExternalId: outcome.booking.contact_external_id ?? "",
        leadExternalId: "",
        appointment: Option.some({ status: "scheduled" as const, externalId: outcome.booking.appointment_external_id ?? "" })
      }
    }
    const stored = (operation: Operations.WriteOperation) =>
      Option.fromNullable(store.stored.find((s) => s.operation === operation))

    // 1. contacts.upsert (only with a usable phone or email).
    const contactInput = Inputs.contact(callId, outcome)
    let contactExternalId = outcome.booking?.contact_external_id ?? ""
    if (Inputs.canUpsert(contactInput)) {
      const previous = Option.flatMap(stored("contacts.upsert"), (s) => decodeUpsert(s.receipt))
      const receipt = Option.isSome(previous) ? previous.value : yield* client.contactsUpsert(contactInput).pipe(
        Effect.tap((r) =>
          store.put({
            operation: "contacts.upsert",
            idempotency_key: contactKey(tenantId, contactInput),
            outcome: "receipt",
            receipt: encodeUpsert(r)
          })
        )
      )
      contactExternalId = receipt.id
    }

    // 2. A requested booking: appointments.create when the bridge supports it.
    const booking: Booking | undefined = outcome.booking?.status === "requested" ? outcome.booking : undefined
    if (booking !== undefined && contactExternalId !== "" && supports(input, "appointments.create")) {
      const previous = stored("appointments.create")
      if (Option.isSome(previous) && previous.value.outcome === "receipt") {
        const receipt = decodeAppointment(previous.value.receipt)
        if (Option.isSome(receipt)) {
          return {
            contactExternalId,
            leadExternalId: "",
            appointment: Option.some({ status: "scheduled" as const, externalId: receipt.value.id })
          }
        }
      }
      if (Option.isNone(previous)) {
        const { appointment: appointmentInput, key } = appointmentRequest(input, booking, tenantId, contactExternalId)
        // 409 and every other refusal mean "not booked": the lead carries the request.
        const refused = (why: Readonly<Record<string, unknown>>) =>
          Effect.as(
            store.put({ operation: "appointments.create", idempotency_key: key, outcome: "refused", receipt: why }),
            Option.none()
          )
        const booked = yield* client.appointmentsCreate(appointmentInput).pipe(
          Effect.map(Option.some),
          Effect.catchTags({
            Conflict: (error) => refused({ error: "Conflict", status: error.status, message: error.message }),
            Permanent: (error) =>
              refused({ error: "Permanent", kind: error.kind, status: error.status, message: error.message })
          })
        )
        if (Option.isSome(booked)) {
          yield* store.put({
            operation: "appointments.create",
            idempotency_key: key,
            outcome: "receipt",
            receipt: encodeAppointment(booked.value)
          })
          return {
            contactExternalId,
            leadExternalId: "",
            appointment: Option.some({ status: "scheduled" as const, externalId: booked.value.id })
          }
        }
      }
    }

    // 3. leads.create — the lead, or the lead carrying an unconfirmed booking request.
    const appointment = booking === undefined
      ? Option.none()
      : Option.some({ status: "requested" as const, externalId: "" })
    const previousLead = Option.flatMap(stored("leads.create"), (s) => decodeLead(s.receipt))
    if (Option.isSome(previousLead)) return { contactExternalId, leadExternalId: previousLead.value.id, appointment }
    if (!supports(input, "leads.create")) {
      return yield* new NotSupported({
        operation: "leads.create",
        message: booking === undefined
          ? "The bridge does not offer leads.create, so the lead cannot be pushed."
          : "The bridge could not book the requested appointment and does not offer leads.create to carry the request."
      })
    }
    const leadInput = Inputs.lead(callId, outcome, booking)
    const created = yield* client.leadsCreate(leadInput)
    yield* store.put({
      operation: "leads.create",
      idempotency_key: leadKey(tenantId, leadInput),
      outcome: "receipt",
      receipt: encodeLead(created)
    })
    return { contactExternalId, leadExternalId: created.id, appointment }
  }).pipe(Effect.withSpan("CrmPush.steps", { attributes: { callId: input.callId } }))
