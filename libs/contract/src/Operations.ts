/**
 * The six svc.crm.v1 operations: names, REST paths, MCP tool names, and the
 * request and success response (receipt) of each.
 */
import { Schema } from "effect"
import { AvailabilityWindow, Appointment, Contact, hasUsableIdentity, Lead, Slot } from "./Resources.js"
import { ContractVersion, IdempotencyKey, Instant, NonBlankString, TimeZone } from "./Values.js"

/** The six fixed operation names, in the contract's order. */
export const OPERATIONS = [
  "capabilities",
  "contacts.search",
  "contacts.upsert",
  "availability.list",
  "appointments.create",
  "leads.create"
] as const

/** A known operation name; an unknown name is refused. */
export const OperationName = Schema.Literal(...OPERATIONS).annotations({ identifier: "OperationName" })
export type OperationName = typeof OperationName.Type

/** The three write operations, which carry an idempotency key. */
export const WRITE_OPERATIONS = ["contacts.upsert", "appointments.create", "leads.create"] as const
export type WriteOperation = typeof WRITE_OPERATIONS[number]
export const isWriteOperation = (op: OperationName): op is WriteOperation =>
  (WRITE_OPERATIONS as ReadonlyArray<string>).includes(op)

/** REST path appended to `{bridge_base_url}` for each operation. */
export const REST_PATHS = {
  "capabilities": "/capabilities",
  "contacts.search": "/contacts/search",
  "contacts.upsert": "/contacts/upsert",
  "availability.list": "/availability",
  "appointments.create": "/appointments",
  "leads.create": "/leads"
} as const satisfies Record<OperationName, string>

/** MCP tool name of each operation (MCP transport table). */
export const TOOL_NAMES = {
  "capabilities": "svc_capabilities",
  "contacts.search": "svc_contacts_search",
  "contacts.upsert": "svc_contacts_upsert",
  "availability.list": "svc_availability_list",
  "appointments.create": "svc_appointments_create",
  "leads.create": "svc_leads_create"
} as const satisfies Record<OperationName, string>
export type ToolName = typeof TOOL_NAMES[OperationName]

/** The operation a tool name stands for. */
export const OPERATION_BY_TOOL: Record<ToolName, OperationName> = Object.fromEntries(
  OPERATIONS.map((op) => [TOOL_NAMES[op], op])
) as Record<ToolName, OperationName>

export const ToolNameSchema = Schema.Literal(...OPERATIONS.map((op) => TOOL_NAMES[op])).annotations({
  identifier: "ToolName"
})

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/** Fields of every request body. */
export const CommonFields = {
  tenant_id: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "Identifies the client tenant." }),
  contract_version: ContractVersion
}

const writeKey = {
  idempotency_key: IdempotencyKey
}

export const CapabilitiesRequest = Schema.Struct(CommonFields).annotations({ identifier: "CapabilitiesRequest" })
export type CapabilitiesRequest = typeof CapabilitiesRequest.Type

export const ContactsSearchRequest = Schema.Struct({
  ...CommonFields,
  phone: Schema.String.annotations({ description: "Phone to match; may be empty." }),
  email: Schema.String.annotations({ description: "Email to match; may be empty." })
}).annotations({ identifier: "ContactsSearchRequest" })
export type ContactsSearchRequest = typeof ContactsSearchRequest.Type

export const ContactsUpsertRequest = Schema.Struct({
  ...CommonFields,
  contact: Contact.pipe(
    Schema.filter((c) => hasUsableIdentity(c) || "a contact upsert needs at least one usable phone or email")
  ),
  ...writeKey
}).annotations({ identifier: "ContactsUpsertRequest" })
export type ContactsUpsertRequest = typeof ContactsUpsertRequest.Type

export const AvailabilityListRequest = Schema.Struct({
  ...CommonFields,
  window: AvailabilityWindow
}).annotations({ identifier: "AvailabilityListRequest" })
export type AvailabilityListRequest = typeof AvailabilityListRequest.Type

export const AppointmentsCreateRequest = Schema.Struct({
  ...CommonFields,
  appointment: Appointment,
  ...writeKey
}).annotations({ identifier: "AppointmentsCreateRequest" })
export type AppointmentsCreateRequest = typeof AppointmentsCreateRequest.Type

export const LeadsCreateRequest = Schema.Struct({
  ...CommonFields,
  lead: Lead,
  ...writeKey
}).annotations({ identifier: "LeadsCreateRequest" })
export type LeadsCreateRequest = typeof LeadsCreateRequest.Type

// ---------------------------------------------------------------------------
// Success responses (receipts)
// ---------------------------------------------------------------------------

/** The slots cap of availability.list (Operation rule 4). */
export const MAX_SLOTS = 50

/**
 * Capabilities: the exact contract version and only known operation names,
 * with contacts.upsert plus leads.create or appointments.create; advertising
 * availability.list requires appointments.create and
 * booking_closes_availability = true (Operation rule 1).
 */
export const CapabilitiesResponse = Schema.Struct({
  contract_version: ContractVersion,
  operations: Schema.Array(OperationName),
  booking_closes_availability: Schema.Boolean
}).pipe(
  Schema.filter((c) => {
    const has = (op: OperationName) => c.operations.includes(op)
    if (!has("contacts.upsert")) return "operations must include contacts.upsert"
    if (!has("leads.create") && !has("appointments.create")) {
      return "operations must include leads.create or appointments.create"
    }
    if (has("availability.list") && !has("appointments.create")) {
      return "availability.list requires appointments.create"
    }
    if (has("availability.list") && !c.booking_closes_availability) {
      return "availability.list requires booking_closes_availability = true"
    }
    return true
  })
).annotations({
  identifier: "CapabilitiesResponse",
  // Valid answers only: contacts.upsert, a write, and availability only with booking.
  arbitrary: () => (fc) =>
    fc.record({
      search: fc.boolean(),
      lead: fc.boolean(),
      booking: fc.boolean(),
      availability: fc.boolean(),
      closes: fc.boolean()
    }).map(({ availability, booking, closes, lead, search }) => {
      const withBooking = booking || availability || !lead
      const operations: Array<OperationName> = ["capabilities", "contacts.upsert"]
      if (search) operations.push("contacts.search")
      if (lead) operations.push("leads.create")
      if (withBooking) operations.push("appointments.create")
      if (availability) operations.push("availability.list")
      return {
        contract_version: "svc.crm.v1" as const,
        operations,
        booking_closes_availability: availability || closes
      }
    })
})
export type CapabilitiesResponse = typeof CapabilitiesResponse.Type

/** A matched contact: only its id is trusted. */
export const ContactMatch = Schema.Struct({ id: NonBlankString }).annotations({ identifier: "ContactMatch" })

/** contacts.search: `{contact: {id}}` or `{contact: null}` when nothing matches (Operation rule 2). */
export const ContactsSearchResponse = Schema.Struct({
  contact: Schema.NullOr(ContactMatch)
}).annotations({ identifier: "ContactsSearchResponse" })
export type ContactsSearchResponse = typeof ContactsSearchResponse.Type

/** contacts.upsert: a nonblank id and `is_new` as a real boolean (Operation rule 3). */
export const ContactsUpsertResponse = Schema.Struct({
  id: NonBlankString,
  is_new: Schema.Boolean
}).annotations({ identifier: "ContactsUpsertResponse" })
export type ContactsUpsertResponse = typeof ContactsUpsertResponse.Type

/** availability.list: at most 50 slots, each with end after start (Operation rule 4). */
export const AvailabilityListResponse = Schema.Struct({
  slots: Schema.Array(Slot).pipe(
    Schema.maxItems(MAX_SLOTS, { message: () => `at most ${MAX_SLOTS} slots may be returned` })
  )
}).annotations({ identifier: "AvailabilityListResponse" })
export type AvailabilityListResponse = typeof AvailabilityListResponse.Type

/**
 * appointments.create: a nonblank id, `confirmed: true`, the exact requested
 * instants and a valid zone (Operation rule 5). Whether start and end equal
 * the request is checked against the request by the client.
 */
export const AppointmentsCreateResponse = Schema.Struct({
  id: NonBlankString,
  confirmed: Schema.Literal(true).annotations({ description: "Must be true; anything else is a failed booking." }),
  start: Instant,
  end: Instant,
  timezone: TimeZone
}).annotations({ identifier: "AppointmentsCreateResponse" })
export type AppointmentsCreateResponse = typeof AppointmentsCreateResponse.Type

/** leads.create: a real receipt with a nonblank id; `ok: true` is not one (Operation rule 6). */
export const LeadsCreateResponse = Schema.Struct({
  id: NonBlankString
}).annotations({ identifier: "LeadsCreateResponse" })
export type LeadsCreateResponse = typeof LeadsCreateResponse.Type

/** Request and response Schema of every operation, for code that is generic over operations. */
export const OperationSchemas = {
  "capabilities": { request: CapabilitiesRequest, response: CapabilitiesResponse },
  "contacts.search": { request: ContactsSearchRequest, response: ContactsSearchResponse },
  "contacts.upsert": { request: ContactsUpsertRequest, response: ContactsUpsertResponse },
  "availability.list": { request: AvailabilityListRequest, response: AvailabilityListResponse },
  "appointments.create": { request: AppointmentsCreateRequest, response: AppointmentsCreateResponse },
  "leads.create": { request: LeadsCreateRequest, response: LeadsCreateResponse }
} as const

export type OperationRequest<Op extends OperationName> = Schema.Schema.Type<typeof OperationSchemas[Op]["request"]>
export type OperationResponse<Op extends OperationName> = Schema.Schema.Type<typeof OperationSchemas[Op]["response"]>
