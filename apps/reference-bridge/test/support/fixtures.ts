/** Request bodies and values shared by the tests. */
import type { Resources } from "@crm-relay/contract"
import { Schema } from "effect"
import { randomBytes } from "node:crypto"
import { Operations, Resources as R } from "@crm-relay/contract"

/** A fresh 64-hex idempotency key. */
export const newKey = (): string => randomBytes(32).toString("hex")

/** A fresh 24-character JSON-RPC id. */
export const newRpcId = (): string => randomBytes(12).toString("hex")

export const TENANT_A = "tenant-a"
export const TENANT_B = "tenant-b"
export const KEY_A = "key-a_0123456789"
export const KEY_B = "key-b_0123456789"
export const CLIENT_A = { clientId: "client a:1", clientSecret: "s3cret+/&=:x", scope: "crm.read crm.write", expiresIn: 120 }
export const CONTRACT_VERSION = "svc.crm.v1"

/** Two tenants: A with an API key and an OAuth client, B with an API key. */
export const TENANTS = [
  { tenantId: TENANT_A, apiKey: KEY_A, oauth: CLIENT_A },
  { tenantId: TENANT_B, apiKey: KEY_B }
] as const

/** A contact as the service sends it (every Present field present). */
export const contact = (overrides: Partial<Record<keyof Resources.Contact, unknown>> & Record<string, unknown> = {}) => ({
  full_name: "Ada Lovelace",
  first_name: "Ada",
  last_name: "Lovelace",
  address: "12 Analytical St",
  source: "Receptionist (phone)",
  call_id: "call-1",
  phones: ["+1 (555) 010-0000"],
  emails: ["Ada@Example.com"],
  tags: ["new-caller"],
  ...overrides
})

/** Monday 2 March 2026, 10:00–11:00 in New York. */
export const MONDAY_10 = { start: "2026-03-02T10:00:00-05:00", end: "2026-03-02T11:00:00-05:00" }

/** An appointment for `contactId`. */
export const appointment = (
  contactId: string,
  interval: { readonly start: string; readonly end: string } = MONDAY_10,
  overrides: Record<string, unknown> = {}
) => ({
  contact_external_id: contactId,
  timezone: "America/New_York",
  start: interval.start,
  end: interval.end,
  slot_text: "Monday at ten",
  job_type: "Boiler repair",
  address: "12 Analytical St",
  notes: "",
  title: "Boiler repair for Ada",
  source: "Receptionist (phone)",
  ...overrides
})

/** A lead. */
export const lead = (overrides: Record<string, unknown> = {}) => ({
  job_type: "Boiler repair",
  summary: "Boiler makes a noise",
  notes: "",
  urgency: "high",
  source: "Receptionist (phone)",
  call_id: "call-1",
  contact: contact(),
  ...overrides
})

/** An availability window. */
export const window = (start: string, end: string, overrides: Record<string, unknown> = {}) => ({
  start,
  end,
  timezone: "America/New_York",
  windows: [],
  slot_minutes: 0,
  job_type: "Boiler repair",
  ...overrides
})

/** The full request body of an operation for a tenant. */
export const bodies = {
  capabilities: (tenant = TENANT_A) => ({ tenant_id: tenant, contract_version: CONTRACT_VERSION }),
  search: (phone: string, email: string, tenant = TENANT_A) => ({ tenant_id: tenant, contract_version: CONTRACT_VERSION, phone, email }),
  upsert: (c: unknown = contact(), key = newKey(), tenant = TENANT_A) => ({
    tenant_id: tenant,
    contract_version: CONTRACT_VERSION,
    contact: c,
    idempotency_key: key
  }),
  availability: (w: unknown, tenant = TENANT_A) => ({ tenant_id: tenant, contract_version: CONTRACT_VERSION, window: w }),
  appointment: (a: unknown, key = newKey(), tenant = TENANT_A) => ({
    tenant_id: tenant,
    contract_version: CONTRACT_VERSION,
    appointment: a,
    idempotency_key: key
  }),
  lead: (l: unknown = lead(), key = newKey(), tenant = TENANT_A) => ({
    tenant_id: tenant,
    contract_version: CONTRACT_VERSION,
    lead: l,
    idempotency_key: key
  })
}

/** Decoders of the contract's resources, for store-level tests. */
export const decodeContact = Schema.decodeUnknownSync(R.Contact)
export const decodeAppointment = Schema.decodeUnknownSync(R.Appointment)
export const decodeLead = Schema.decodeUnknownSync(R.Lead)

/** Whether a receipt is valid for `operation` by the contract's own Schema. */
export const isValidReceipt = (operation: Operations.OperationName, receipt: unknown): boolean =>
  receiptValidators[operation](receipt)

const receiptValidators: Record<Operations.OperationName, (u: unknown) => boolean> = {
  "capabilities": Schema.is(Operations.CapabilitiesResponse),
  "contacts.search": Schema.is(Operations.ContactsSearchResponse),
  "contacts.upsert": Schema.is(Operations.ContactsUpsertResponse),
  "availability.list": Schema.is(Operations.AvailabilityListResponse),
  "appointments.create": Schema.is(Operations.AppointmentsCreateResponse),
  "leads.create": Schema.is(Operations.LeadsCreateResponse)
}
