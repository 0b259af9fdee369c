/** Sample inputs for the client tests. */
import type { AppointmentInput, AvailabilityWindowInput, ContactInput, LeadInput } from "../../src/BridgeClient.js"

export const contact: ContactInput = {
  full_name: "Ada Lovelace",
  first_name: "Ada",
  last_name: "Lovelace",
  address: "12 Analytical Row",
  source: "Receptionist (phone)",
  call_id: "call-42",
  phones: ["+1 (555) 010-0042"],
  emails: ["Ada@Example.com "],
  tags: ["inbound"]
}

export const appointment: AppointmentInput = {
  contact_external_id: "contact-1",
  timezone: "America/New_York",
  start: "2026-03-02T09:00:00-05:00",
  end: "2026-03-02T10:00:00-05:00",
  slot_text: "Monday at nine",
  job_type: "Boiler repair",
  address: "12 Analytical Row",
  notes: "Side door",
  title: "Boiler repair for Ada",
  source: "Receptionist (phone)",
  location: { id: "loc-1", name: "North" }
}

export const lead: LeadInput = {
  job_type: "Boiler repair",
  summary: "No hot water",
  notes: "Since Tuesday",
  urgency: "high",
  source: "Receptionist (phone)",
  call_id: "call-42",
  contact
}

export const window: AvailabilityWindowInput = {
  start: "2026-03-02T08:00:00-05:00",
  end: "2026-03-02T18:00:00-05:00",
  timezone: "America/New_York",
  windows: [[0, 480, 1080]],
  slot_minutes: 60,
  job_type: "Boiler repair"
}
