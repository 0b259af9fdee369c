/**
 * One realistic example of each message, in its wire (encoded) form. The
 * OpenAPI documents carry them, and a test decodes every one with its Schema,
 * so an example can never drift from the contract.
 */
import type * as Events from "./Events.js"
import type * as Operations from "./Operations.js"
import type * as Resources from "./Resources.js"

type Wire<S extends { readonly Encoded: unknown }> = S["Encoded"]

const tenant = { tenant_id: "tenant-acme-plumbing", contract_version: "svc.crm.v1" } as const

export const contact = {
  full_name: "Dana Whitfield",
  first_name: "Dana",
  last_name: "Whitfield",
  address: "42 Elm Street, Springfield",
  source: "AI receptionist (phone)",
  call_id: "call_01JC9Z6Q4V7W",
  phones: ["+15551234567"],
  emails: ["dana@example.com"],
  tags: ["inbound"],
  postal_code: "62704"
} satisfies Wire<typeof Resources.Contact>

export const location = { id: "loc-springfield", name: "Springfield branch" } satisfies Wire<typeof Resources.Location>

export const lead = {
  job_type: "Water heater repair",
  summary: "No hot water since this morning.",
  notes: "Side gate code 4411.",
  urgency: "today",
  source: "AI receptionist (phone)",
  call_id: "call_01JC9Z6Q4V7W",
  contact,
  location
} satisfies Wire<typeof Resources.Lead>

export const appointment = {
  contact_external_id: "crm-contact-8812",
  timezone: "America/Chicago",
  start: "2026-03-02T09:00:00-06:00",
  end: "2026-03-02T10:00:00-06:00",
  slot_text: "Monday at 9 am",
  job_type: "Water heater repair",
  address: "42 Elm Street, Springfield",
  notes: "Side gate code 4411.",
  title: "Water heater repair – Whitfield",
  source: "AI receptionist (phone)",
  location
} satisfies Wire<typeof Resources.Appointment>

export const availabilityWindow = {
  start: "2026-03-02T00:00:00-06:00",
  end: "2026-03-07T00:00:00-06:00",
  timezone: "America/Chicago",
  windows: [[0, 480, 1020], [1, 480, 1020], [2, 480, 1020], [3, 480, 1020], [4, 480, 960]],
  slot_minutes: 60,
  job_type: "Water heater repair"
} satisfies Wire<typeof Resources.AvailabilityWindow>

const key = "9f2c4e1a7b3d5f60818293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"

export const capabilitiesRequest = tenant satisfies Wire<typeof Operations.CapabilitiesRequest>
export const capabilitiesResponse = {
  contract_version: "svc.crm.v1",
  operations: ["capabilities", "contacts.search", "contacts.upsert", "availability.list", "appointments.create", "leads.create"],
  booking_closes_availability: true
} satisfies Wire<typeof Operations.CapabilitiesResponse>

export const contactsSearchRequest = { ...tenant, phone: "+15551234567", email: "" } satisfies Wire<
  typeof Operations.ContactsSearchRequest
>
export const contactsSearchResponse = { contact: { id: "crm-contact-8812" } } satisfies Wire<
  typeof Operations.ContactsSearchResponse
>

export const contactsUpsertRequest = { ...tenant, contact, idempotency_key: key } satisfies Wire<
  typeof Operations.ContactsUpsertRequest
>
export const contactsUpsertResponse = { id: "crm-contact-8812", is_new: false } satisfies Wire<
  typeof Operations.ContactsUpsertResponse
>

export const availabilityListRequest = { ...tenant, window: availabilityWindow } satisfies Wire<
  typeof Operations.AvailabilityListRequest
>
export const availabilityListResponse = {
  slots: [
    { start: "2026-03-02T09:00:00-06:00", end: "2026-03-02T10:00:00-06:00", timezone: "America/Chicago" },
    { start: "2026-03-02T11:00:00-06:00", end: "2026-03-02T12:00:00-06:00", timezone: "America/Chicago" }
  ]
} satisfies Wire<typeof Operations.AvailabilityListResponse>

export const appointmentsCreateRequest = { ...tenant, appointment, idempotency_key: key } satisfies Wire<
  typeof Operations.AppointmentsCreateRequest
>
export const appointmentsCreateResponse = {
  id: "crm-appt-5521",
  confirmed: true,
  start: "2026-03-02T09:00:00-06:00",
  end: "2026-03-02T10:00:00-06:00",
  timezone: "America/Chicago"
} satisfies Wire<typeof Operations.AppointmentsCreateResponse>

export const leadsCreateRequest = { ...tenant, lead, idempotency_key: key } satisfies Wire<
  typeof Operations.LeadsCreateRequest
>
export const leadsCreateResponse = { id: "crm-lead-3307" } satisfies Wire<typeof Operations.LeadsCreateResponse>

export const subscribeRequest = { targetUrl: "https://hooks.example.com/crm-relay/lead", event: "lead" } satisfies Wire<
  typeof Events.SubscribeRequest
>
export const subscribeResponse = { id: "0b6f3c1e-9a52-4d7e-8c11-5f2a7d9e4b30" } satisfies Wire<
  typeof Events.SubscribeResponse
>
export const previewRecord = {
  id: "6a1d2f0e-3b4c-4d5e-8f60-718293a4b5c6",
  call_id: "call_01JC9Z6Q4V7W",
  source: "AI receptionist (phone)",
  contact: { external_id: "crm-contact-8812" },
  job_type: "",
  summary: "",
  booked: true
} satisfies Wire<typeof Events.PreviewRecord>

export const leadEvent = {
  id: "6a1d2f0e-3b4c-4d5e-8f60-718293a4b5c6",
  event: "lead",
  call_id: "call_01JC9Z6Q4V7W",
  source: "AI receptionist (phone)",
  contact: {
    external_id: "crm-contact-8812",
    full_name: "Dana Whitfield",
    first_name: "Dana",
    last_name: "Whitfield",
    phones: ["+15551234567"],
    emails: ["dana@example.com"],
    address: "42 Elm Street, Springfield",
    postal_code: "62704"
  },
  job_type: "Water heater repair",
  summary: "No hot water since this morning.",
  booked: false,
  created_at: "2026-03-01T16:20:11.532Z"
} satisfies Wire<typeof Events.LeadEvent>

export const bookingEvent = {
  ...leadEvent,
  id: "1c9e7a55-2f43-4b8d-9e06-3a7b1d2c4e5f",
  event: "booking",
  booked: true,
  appointment: {
    external_id: "crm-appt-5521",
    status: "scheduled",
    start: "2026-03-02T09:00:00-06:00",
    end: "2026-03-02T10:00:00-06:00",
    timezone: "America/Chicago",
    slot_text: "Monday at 9 am",
    title: "Water heater repair – Whitfield",
    job_type: "Water heater repair",
    address: "42 Elm Street, Springfield"
  }
} satisfies Wire<typeof Events.BookingEvent>

export const errorObject = { error: "The targetUrl field is required." } satisfies Wire<typeof Events.ErrorObject>
export const rateLimitedObject = {
  error: "Rate limit exceeded: 60 requests per key per minute.",
  retryAfterSeconds: 12
} satisfies Wire<typeof Events.ErrorObject>
