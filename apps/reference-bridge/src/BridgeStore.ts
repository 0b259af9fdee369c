/**
 * Where the reference CRM keeps contacts, leads, appointments and the
 * idempotency mapping. Two Layers implement it: `MemoryStore.layer` and
 * `SqlStore.layer` (any `SqlClient`, PostgreSQL or PGlite). Every write and
 * its idempotency mapping commit together (Idempotency rule 1).
 */
import type { Operations, Resources } from "@crm-relay/contract"
import { Values } from "@crm-relay/contract"
import { Context, Data } from "effect"
import type { Effect, Option } from "effect"
import type { BookedInterval } from "./Calendar.js"

/** A contact as the CRM holds it. */
export interface StoredContact {
  readonly tenantId: string
  readonly id: string
  readonly contact: Resources.Contact
  readonly createdAt: string
  readonly updatedAt: string
}

/** A lead as the CRM holds it. */
export interface StoredLead {
  readonly tenantId: string
  readonly id: string
  readonly idempotencyKey: string
  readonly lead: Resources.Lead
  readonly createdAt: string
}

/** A booked appointment. */
export interface StoredAppointment {
  readonly tenantId: string
  readonly id: string
  readonly idempotencyKey: string
  readonly appointment: Resources.Appointment
  readonly startMs: number
  readonly endMs: number
  readonly createdAt: string
}

/** The receipt each write operation answers. */
export interface WriteReceipts {
  readonly "contacts.upsert": Operations.ContactsUpsertResponse
  readonly "leads.create": Operations.LeadsCreateResponse
  readonly "appointments.create": Operations.AppointmentsCreateResponse
}

/** One entry of the idempotency mapping: the key and the receipt it answered first. */
export type StoredKey = {
  readonly [Op in Operations.WriteOperation]: {
    readonly tenantId: string
    readonly operation: Op
    readonly idempotencyKey: string
    readonly receipt: WriteReceipts[Op]
    readonly createdAt: string
  }
}[Operations.WriteOperation]

/** Everything the store holds, oldest first, for tests and the control API. */
export interface StoredRecords {
  readonly contacts: ReadonlyArray<StoredContact>
  readonly leads: ReadonlyArray<StoredLead>
  readonly appointments: ReadonlyArray<StoredAppointment>
  readonly idempotency: ReadonlyArray<StoredKey>
}

/** The requested interval is full or no longer open (HTTP 409). */
export class SlotTaken extends Data.TaggedError("SlotTaken")<{
  readonly message: string
}> {}

/** `contact_external_id` names no contact of this tenant (HTTP 400). */
export class UnknownContact extends Data.TaggedError("UnknownContact")<{
  readonly contactId: string
  readonly message: string
}> {}

/** A booking to create, with its interval already resolved to epoch milliseconds. */
export interface Booking {
  readonly appointment: Resources.Appointment
  readonly startMs: number
  readonly endMs: number
  /** Appointments that may overlap one instant (the calendar's capacity). */
  readonly capacity: number
}

/** The reference CRM's storage, scoped by tenant in every call. */
export class BridgeStore extends Context.Tag("@crm-relay/reference-bridge/BridgeStore")<BridgeStore, {
  /** The oldest contact whose phone digits or email match; none when nothing matches. */
  readonly searchContact: (tenantId: string, phone: string, email: string) => Effect.Effect<Option.Option<string>>
  /**
   * Replays the receipt stored for `key`, else matches by phone or email
   * identity (merging into that contact, `is_new: false`) before creating one.
   */
  readonly upsertContact: (
    tenantId: string,
    key: string,
    contact: Resources.Contact
  ) => Effect.Effect<Operations.ContactsUpsertResponse>
  /** Replays the receipt stored for `key`, else creates the lead. */
  readonly createLead: (tenantId: string, key: string, lead: Resources.Lead) => Effect.Effect<Operations.LeadsCreateResponse>
  /** Booked intervals of a tenant overlapping `[fromMs, toMs)`. */
  readonly bookedIntervals: (tenantId: string, fromMs: number, toMs: number) => Effect.Effect<ReadonlyArray<BookedInterval>>
  /**
   * Replays the receipt stored for `key`, else checks the contact and the
   * capacity and books, all in one atomic step.
   */
  readonly createAppointment: (
    tenantId: string,
    key: string,
    booking: Booking
  ) => Effect.Effect<Operations.AppointmentsCreateResponse, SlotTaken | UnknownContact>
  /** Everything stored, for tests. */
  readonly records: Effect.Effect<StoredRecords>
  /** Deletes everything. */
  readonly reset: Effect.Effect<void>
}>() {}

/** The receipt of a booking: confirmed, echoing the requested instants and zone exactly (Operation rule 5). */
export const appointmentReceipt = (id: string, appointment: Resources.Appointment): Operations.AppointmentsCreateResponse => ({
  id: Values.NonBlankString.make(id),
  confirmed: true,
  start: appointment.start,
  end: appointment.end,
  timezone: appointment.timezone
})

/** Merges a contact update into a stored contact: non-empty fields win, lists are united. */
export const mergeContact = (stored: Resources.Contact, update: Resources.Contact): Resources.Contact => {
  const pick = (a: string, b: string) => (b.trim() === "" ? a : b)
  const union = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => [...new Set([...a, ...b])]
  const postal = update.postal_code ?? stored.postal_code
  return {
    full_name: pick(stored.full_name, update.full_name),
    first_name: pick(stored.first_name, update.first_name),
    last_name: pick(stored.last_name, update.last_name),
    address: pick(stored.address, update.address),
    source: pick(stored.source, update.source),
    call_id: pick(stored.call_id, update.call_id),
    phones: union(stored.phones, update.phones),
    emails: union(stored.emails, update.emails),
    tags: union(stored.tags, update.tags),
    ...(postal === undefined ? {} : { postal_code: postal })
  }
}
