/**
 * Idempotency rule 2: keys derive from what identifies the write; mutable
 * descriptions do not change them; every key is 64 lowercase hex characters.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { Resources } from "@crm-relay/contract"
import * as IdempotencyKeys from "../src/IdempotencyKeys.js"
import * as Samples from "./support/Samples.js"

const contact = Schema.decodeUnknownSync(Resources.Contact)(Samples.contact)
const appointment = Schema.decodeUnknownSync(Resources.Appointment)(Samples.appointment)
const lead = Schema.decodeUnknownSync(Resources.Lead)(Samples.lead)
const HEX64 = /^[0-9a-f]{64}$/

describe("IdempotencyKeys", () => {
  it("Limits: idempotency key length — every key is 64 lowercase hexadecimal characters", () => {
    expect(IdempotencyKeys.contactKey("t", contact)).toMatch(HEX64)
    expect(IdempotencyKeys.appointmentKey("t", appointment)).toMatch(HEX64)
    expect(IdempotencyKeys.leadKey("t", lead)).toMatch(HEX64)
    expect(IdempotencyKeys.leadKey("t", { ...lead, call_id: "" })).toMatch(HEX64)
  })

  it("Idempotency rule 2: contact keys derive from normalized identity — formatting, case, order and duplicates do not matter", () => {
    const a = IdempotencyKeys.contactKey("t", { ...contact, phones: ["+1 (555) 010-0042", "555 0100"], emails: ["Ada@Example.com "] })
    const b = IdempotencyKeys.contactKey("t", {
      ...contact,
      phones: ["5550100", "+15550100042", "+1-555-010-0042"],
      emails: ["ada@example.com", " ADA@example.COM"]
    })
    expect(a).toBe(b)
    expect(IdempotencyKeys.normalizePhone("+1 (555) 010-0042")).toBe("+15550100042")
    expect(IdempotencyKeys.normalizePhone("(555) 010-0042")).toBe("5550100042")
    expect(IdempotencyKeys.normalizeEmail("  Ada@Example.COM ")).toBe("ada@example.com")
  })

  it("Idempotency rule 2: contact keys ignore mutable descriptions (names, address, tags, source)", () => {
    const changed = { ...contact, full_name: "A. King", first_name: "A.", address: "Elsewhere", tags: ["x"], source: "web" }
    expect(IdempotencyKeys.contactKey("t", changed)).toBe(IdempotencyKeys.contactKey("t", contact))
  })

  it("Idempotency rule 2: a different identity or a different tenant gives a different contact key", () => {
    const base = IdempotencyKeys.contactKey("t", contact)
    expect(IdempotencyKeys.contactKey("t", { ...contact, phones: ["+15550100043"] })).not.toBe(base)
    expect(IdempotencyKeys.contactKey("other", contact)).not.toBe(base)
    // The leading + is part of the identity: "+1555…" and "1555…" stay apart.
    expect(IdempotencyKeys.contactKey("t", { ...contact, phones: ["15550100042"], emails: [] }))
      .not.toBe(IdempotencyKeys.contactKey("t", { ...contact, phones: ["+15550100042"], emails: [] }))
  })

  it("Idempotency rule 2: mutable descriptions do not change appointment keys (notes, title, slot_text, address, source)", () => {
    const changed = { ...appointment, notes: "Front door", title: "Other", slot_text: "9am", address: "x", source: "y" }
    expect(IdempotencyKeys.appointmentKey("t", changed)).toBe(IdempotencyKeys.appointmentKey("t", appointment))
  })

  it("Idempotency rule 2: appointment keys derive from the UTC interval — the same instants at another offset give the same key", () => {
    const utc = Schema.decodeUnknownSync(Resources.Appointment)({
      ...Samples.appointment,
      start: "2026-03-02T14:00:00Z",
      end: "2026-03-02T15:00:00.000Z"
    })
    expect(IdempotencyKeys.appointmentKey("t", utc)).toBe(IdempotencyKeys.appointmentKey("t", appointment))
  })

  it("Idempotency rule 2: tenant, contact, interval, service or job type, and location each change the appointment key", () => {
    const base = IdempotencyKeys.appointmentKey("t", appointment)
    const variants = [
      IdempotencyKeys.appointmentKey("t2", appointment),
      IdempotencyKeys.appointmentKey("t", { ...appointment, contact_external_id: "contact-2" as typeof appointment.contact_external_id }),
      IdempotencyKeys.appointmentKey("t", Schema.decodeUnknownSync(Resources.Appointment)({ ...Samples.appointment, end: "2026-03-02T10:30:00-05:00" })),
      IdempotencyKeys.appointmentKey("t", { ...appointment, job_type: "Plumbing" }),
      IdempotencyKeys.appointmentKey("t", { ...appointment, service_id: "svc-9" }),
      IdempotencyKeys.appointmentKey("t", { ...appointment, location: { id: "loc-2", name: "North" } })
    ]
    expect(new Set([base, ...variants]).size).toBe(variants.length + 1)
  })

  it("Idempotency rule 2: lead keys derive from call ID and job type — summary, notes, urgency and contact details do not change them", () => {
    const changed = { ...lead, summary: "Other", notes: "More", urgency: "low", contact: { ...contact, full_name: "X" } }
    expect(IdempotencyKeys.leadKey("t", changed)).toBe(IdempotencyKeys.leadKey("t", lead))
    expect(IdempotencyKeys.leadKey("t", { ...lead, job_type: "Plumbing" })).not.toBe(IdempotencyKeys.leadKey("t", lead))
    expect(IdempotencyKeys.leadKey("t", { ...lead, call_id: "call-43" })).not.toBe(IdempotencyKeys.leadKey("t", lead))
  })

  it("Idempotency rule 2: without a call ID the lead key is a content hash — stable for the same lead, different for another", () => {
    const noCall = { ...lead, call_id: "" }
    const reordered = Object.fromEntries(Object.entries(noCall).reverse()) as typeof noCall
    expect(IdempotencyKeys.leadKey("t", reordered)).toBe(IdempotencyKeys.leadKey("t", noCall))
    expect(IdempotencyKeys.leadKey("t", { ...noCall, summary: "Other" })).not.toBe(IdempotencyKeys.leadKey("t", noCall))
  })
})
