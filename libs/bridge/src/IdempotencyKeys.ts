/**
 * Write idempotency keys (Idempotency rule 2): derived from what identifies
 * the write, never from mutable descriptions, so every retry and every replay
 * of the same write carries the same 64-hex key.
 *
 * A key is SHA-256 over a JSON array (an unambiguous encoding) that starts
 * with a domain label per kind and the tenant id.
 */
import { createHash } from "node:crypto"
import type { Resources } from "@crm-relay/contract"
import { Values } from "@crm-relay/contract"

const DOMAIN = {
  contact: "crm-relay/idempotency/contact/v1",
  appointment: "crm-relay/idempotency/appointment/v1",
  leadByCall: "crm-relay/idempotency/lead-by-call/v1",
  leadByContent: "crm-relay/idempotency/lead-by-content/v1"
} as const

const digest = (parts: ReadonlyArray<unknown>): Values.IdempotencyKey =>
  Values.IdempotencyKey.make(createHash("sha256").update(JSON.stringify(parts), "utf8").digest("hex"))

/** A phone reduced to its digits, keeping a leading `+` (`+1 (555) 010-0000` → `+15550100000`). */
export const normalizePhone = (phone: string): string => {
  const trimmed = phone.trim()
  const digits = trimmed.replace(/\D/g, "")
  return digits === "" ? "" : trimmed.startsWith("+") ? `+${digits}` : digits
}

/** An email trimmed and lower-cased — for the key only; the contact is sent as captured. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase()

const normalizedSet = (values: ReadonlyArray<string>, normalize: (s: string) => string): Array<string> =>
  [...new Set(values.map(normalize).filter((v) => v !== ""))].sort()

/** Free-form labels (job type) compared without case or surrounding/duplicate spaces. */
const normalizeLabel = (label: string): string => label.trim().replace(/\s+/g, " ").toLowerCase()

/**
 * contacts.upsert: the tenant and the normalized identity — phones as digits
 * (leading `+` kept), emails trimmed and lower-cased, each sorted and
 * de-duplicated. Names, address, tags and notes do not change it.
 */
export const contactKey = (tenantId: string, contact: Resources.Contact): Values.IdempotencyKey =>
  digest([
    DOMAIN.contact,
    tenantId,
    normalizedSet(contact.phones, normalizePhone),
    normalizedSet(contact.emails, normalizeEmail)
  ])

/**
 * appointments.create: tenant, contact, the UTC interval, the service id (or
 * the job type when there is none) and the location id. Title, notes,
 * slot_text, address and source do not change it.
 */
export const appointmentKey = (tenantId: string, appointment: Resources.Appointment): Values.IdempotencyKey =>
  digest([
    DOMAIN.appointment,
    tenantId,
    appointment.contact_external_id,
    Values.instantToUtc(appointment.start),
    Values.instantToUtc(appointment.end),
    appointment.service_id !== undefined
      ? ["service", appointment.service_id.trim()]
      : ["job_type", normalizeLabel(appointment.job_type)],
    appointment.location?.id ?? null
  ])

// Canonical JSON: object keys sorted, so the same lead always hashes the same.
const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(
      Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])])
    )
    : value

/**
 * leads.create: the call id and job type when there is a call id; summary,
 * notes and urgency do not change it. Without a call id there is nothing
 * stable to key on, so the key is a hash of the whole lead's content.
 */
export const leadKey = (tenantId: string, lead: Resources.Lead): Values.IdempotencyKey =>
  lead.call_id.trim() !== ""
    ? digest([DOMAIN.leadByCall, tenantId, lead.call_id.trim(), normalizeLabel(lead.job_type)])
    : digest([DOMAIN.leadByContent, tenantId, canonical(lead)])
