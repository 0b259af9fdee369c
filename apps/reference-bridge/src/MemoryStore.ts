/**
 * `BridgeStore` in memory. Each write is one `Ref.modify`, a single atomic
 * step: the replay check, the capacity check, the write and the idempotency
 * mapping cannot interleave with another request.
 */
import type { Operations, Resources } from "@crm-relay/contract"
import { Values } from "@crm-relay/contract"
import { Effect, Either, Layer, Option, Ref } from "effect"
import type { Booking, StoredAppointment, StoredContact, StoredKey, StoredLead, StoredRecords } from "./BridgeStore.js"
import { appointmentReceipt, BridgeStore, mergeContact, SlotTaken, UnknownContact } from "./BridgeStore.js"
import { newId, nowIso } from "./internal/ids.js"
import { identities, intersects } from "./internal/identity.js"

interface State {
  readonly contacts: ReadonlyArray<StoredContact>
  readonly leads: ReadonlyArray<StoredLead>
  readonly appointments: ReadonlyArray<StoredAppointment>
  readonly keys: ReadonlyArray<StoredKey>
}

const empty: State = { contacts: [], leads: [], appointments: [], keys: [] }

const findKey = (state: State, tenantId: string, operation: Operations.WriteOperation, key: string) =>
  state.keys.find((k) => k.tenantId === tenantId && k.operation === operation && k.idempotencyKey === key)

/** Builds an in-memory store. */
export const make: Effect.Effect<BridgeStore["Type"]> = Effect.gen(function*() {
  const state = yield* Ref.make(empty)

  const searchContact = (tenantId: string, phone: string, email: string) =>
    Effect.map(Ref.get(state), (s) => {
      const wanted = identities({ phones: [phone], emails: [email] })
      return Option.fromNullable(
        s.contacts.find((c) => c.tenantId === tenantId && intersects(identities(c.contact), wanted))
      ).pipe(Option.map((c) => c.id))
    })

  const upsertContact = (tenantId: string, key: string, contact: Resources.Contact) =>
    Effect.gen(function*() {
      const id = yield* newId("ct")
      const now = yield* nowIso
      return yield* Ref.modify(state, (s): [Operations.ContactsUpsertResponse, State] => {
        const replay = findKey(s, tenantId, "contacts.upsert", key)
        if (replay?.operation === "contacts.upsert") return [replay.receipt, s]
        const wanted = identities(contact)
        const match = s.contacts.find((c) => c.tenantId === tenantId && intersects(identities(c.contact), wanted))
        const receipt: Operations.ContactsUpsertResponse = match === undefined
          ? { id: Values.NonBlankString.make(id), is_new: true }
          : { id: Values.NonBlankString.make(match.id), is_new: false }
        const contacts = match === undefined
          ? [...s.contacts, { tenantId, id, contact, createdAt: now, updatedAt: now }]
          : s.contacts.map((c) => c === match ? { ...c, contact: mergeContact(c.contact, contact), updatedAt: now } : c)
        const mapping: StoredKey = { tenantId, operation: "contacts.upsert", idempotencyKey: key, receipt, createdAt: now }
        return [receipt, { ...s, contacts, keys: [...s.keys, mapping] }]
      })
    })

  const createLead = (tenantId: string, key: string, lead: Resources.Lead) =>
    Effect.gen(function*() {
      const id = yield* newId("ld")
      const now = yield* nowIso
      return yield* Ref.modify(state, (s): [Operations.LeadsCreateResponse, State] => {
        const replay = findKey(s, tenantId, "leads.create", key)
        if (replay?.operation === "leads.create") return [replay.receipt, s]
        const receipt: Operations.LeadsCreateResponse = { id: Values.NonBlankString.make(id) }
        const mapping: StoredKey = { tenantId, operation: "leads.create", idempotencyKey: key, receipt, createdAt: now }
        return [receipt, {
          ...s,
          leads: [...s.leads, { tenantId, id, idempotencyKey: key, lead, createdAt: now }],
          keys: [...s.keys, mapping]
        }]
      })
    })

  const bookedIntervals = (tenantId: string, fromMs: number, toMs: number) =>
    Effect.map(Ref.get(state), (s) =>
      s.appointments
        .filter((a) => a.tenantId === tenantId && a.startMs < toMs && a.endMs > fromMs)
        .map(({ endMs, startMs }) => ({ startMs, endMs })))

  const createAppointment = (tenantId: string, key: string, booking: Booking) =>
    Effect.gen(function*() {
      const id = yield* newId("ap")
      const now = yield* nowIso
      const outcome = yield* Ref.modify(
        state,
        (s): [Either.Either<Operations.AppointmentsCreateResponse, SlotTaken | UnknownContact>, State] => {
          const replay = findKey(s, tenantId, "appointments.create", key)
          if (replay?.operation === "appointments.create") return [Either.right(replay.receipt), s]
          const contactId = booking.appointment.contact_external_id
          if (!s.contacts.some((c) => c.tenantId === tenantId && c.id === contactId)) {
            return [Either.left(new UnknownContact({ contactId, message: "contact_external_id names no contact of this tenant" })), s]
          }
          const overlapping = s.appointments.filter((a) =>
            a.tenantId === tenantId && a.startMs < booking.endMs && a.endMs > booking.startMs
          ).length
          if (overlapping >= booking.capacity) {
            return [Either.left(new SlotTaken({ message: "the requested slot is taken" })), s]
          }
          const receipt = appointmentReceipt(id, booking.appointment)
          const stored: StoredAppointment = {
            tenantId,
            id,
            idempotencyKey: key,
            appointment: booking.appointment,
            startMs: booking.startMs,
            endMs: booking.endMs,
            createdAt: now
          }
          const mapping: StoredKey = { tenantId, operation: "appointments.create", idempotencyKey: key, receipt, createdAt: now }
          return [Either.right(receipt), { ...s, appointments: [...s.appointments, stored], keys: [...s.keys, mapping] }]
        }
      )
      return yield* outcome
    })

  const records: Effect.Effect<StoredRecords> = Effect.map(Ref.get(state), (s) => ({
    contacts: s.contacts,
    leads: s.leads,
    appointments: s.appointments,
    idempotency: s.keys
  }))

  return BridgeStore.of({
    searchContact,
    upsertContact,
    createLead,
    bookedIntervals,
    createAppointment,
    records,
    reset: Ref.set(state, empty)
  })
})

/** `BridgeStore` in memory: complete, atomic, lost when the process ends. */
export const layer: Layer.Layer<BridgeStore> = Layer.effect(BridgeStore, make)
