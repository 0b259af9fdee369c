import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Events from "../src/Events.js"
import * as Examples from "../src/Examples.js"
import * as Mcp from "../src/Mcp.js"
import * as OAuth from "../src/OAuth.js"
import * as Operations from "../src/Operations.js"
import { Appointment, AvailabilityWindow, Contact, Lead, Slot } from "../src/Resources.js"

/** Every message Schema of both documents, by name. */
const messages = {
  Contact,
  Lead,
  Appointment,
  AvailabilityWindow,
  Slot,
  ...Object.fromEntries(
    Operations.OPERATIONS.flatMap((op) => [
      [`${op} request`, Operations.OperationSchemas[op].request],
      [`${op} response`, Operations.OperationSchemas[op].response]
    ])
  ),
  ToolsCallRequest: Mcp.ToolsCallRequest,
  TokenResponse: OAuth.TokenResponse,
  SubscribeRequest: Events.SubscribeRequest,
  SubscribeResponse: Events.SubscribeResponse,
  PreviewRecord: Events.PreviewRecord,
  ErrorObject: Events.ErrorObject,
  LeadEvent: Events.LeadEvent,
  BookingEvent: Events.BookingEvent
} as Record<string, Schema.Schema<unknown, unknown>>

/** Messages whose encoding may hold a null: search answers `contact: null`; MCP arguments are opaque here. */
const mayHoldNull = new Set(["contacts.search response", "ToolsCallRequest"])

/**
 * JSON has no negative zero: a -0 inside opaque JSON (MCP arguments) arrives as 0. That is the same
 * JSON text, so the round trip compares values with -0 read as 0 (plain objects and arrays only).
 */
const withoutNegativeZero = (value: unknown): unknown =>
  Object.is(value, -0)
    ? 0
    : Array.isArray(value)
    ? value.map(withoutNegativeZero)
    : value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutNegativeZero(v)]))
    : value

const throughJson = (schema: Schema.Schema<unknown, unknown>, value: unknown) => {
  const text = JSON.stringify(Schema.encodeSync(schema)(value))
  return { text, decoded: Schema.decodeUnknownSync(schema)(JSON.parse(text)) }
}

describe("Serialization rules", () => {
  it("rule 1: a Present field is always encoded, even as \"\" or []", () => {
    const empty = {
      full_name: "",
      first_name: "",
      last_name: "",
      address: "",
      source: "",
      call_id: "",
      phones: [],
      emails: [],
      tags: []
    }
    expect(JSON.parse(JSON.stringify(Schema.encodeSync(Contact)(Schema.decodeSync(Contact)(empty))))).toEqual(empty)
  })

  it("rule 2: an Optional field is omitted when absent and never encoded as null", () => {
    const { postal_code: _, ...withoutPostalCode } = Examples.contact
    const encoded = Schema.encodeSync(Contact)(Schema.decodeSync(Contact)(withoutPostalCode))
    expect(Object.keys(encoded)).not.toContain("postal_code")
    const { location: __, ...withoutLocation } = Examples.lead
    expect(JSON.stringify(Schema.encodeSync(Lead)(Schema.decodeSync(Lead)(withoutLocation)))).not.toContain("location")
  })

  it("rule 2: an Optional field sent as null is refused, not taken as absent", () => {
    expect(() => Schema.decodeUnknownSync(Contact)({ ...Examples.contact, postal_code: null })).toThrow(/postal_code/)
    expect(() => Schema.decodeUnknownSync(Appointment)({ ...Examples.appointment, service_id: null })).toThrow(
      /service_id/
    )
  })

  it("rule 2: \"A field marked Optional is omitted when absent. It is never sent as null.\" — Contact.postal_code \"Omitted when no postal code is supplied\" and Appointment.service_id \"Omitted when empty\": an empty value is omitted, never sent as \"\", never a reason to refuse", () => {
    for (const empty of ["", "   "]) {
      const contact = Schema.decodeUnknownSync(Contact)({ ...Examples.contact, postal_code: empty })
      expect(Object.keys(Schema.encodeSync(Contact)(contact))).not.toContain("postal_code")
      const appointment = Schema.decodeUnknownSync(Appointment)({ ...Examples.appointment, service_id: empty })
      expect(Object.keys(Schema.encodeSync(Appointment)(appointment))).not.toContain("service_id")
      const upsert = Schema.decodeUnknownSync(Operations.ContactsUpsertRequest)({
        ...Examples.contactsUpsertRequest,
        contact: { ...Examples.contact, postal_code: empty }
      })
      expect(JSON.stringify(upsert)).not.toContain("postal_code")
    }
    // A value that is there is sent as it is.
    expect(Schema.decodeUnknownSync(Contact)({ ...Examples.contact, postal_code: " 62704" }).postal_code).toBe(" 62704")
    expect(Schema.decodeUnknownSync(Appointment)({ ...Examples.appointment, service_id: "svc-9" }).service_id).toBe("svc-9")
  })

  it("rule 3: decoding accepts unknown additional fields", () => {
    const decoded = Schema.decodeUnknownSync(Operations.ContactsUpsertResponse)({
      id: "c-1",
      is_new: true,
      crm_specific: { anything: [1, 2] }
    })
    expect(decoded).toEqual({ id: "c-1", is_new: true })
    expect(Schema.decodeUnknownSync(Lead)({ ...Examples.lead, priority_score: 7 })).toEqual(Examples.lead)
  })

  it("rule 4: there is no field for transcripts, recordings or arbitrary metadata", () => {
    const decoded = Schema.decodeUnknownSync(Lead)({
      ...Examples.lead,
      transcript: "…",
      recording_url: "https://example.com/r.mp3",
      metadata: { a: 1 }
    })
    expect(Object.keys(Schema.encodeSync(Lead)(decoded))).not.toEqual(
      expect.arrayContaining(["transcript", "recording_url", "metadata"])
    )
  })
})

/** 60 runs per property in the suite; `PROP_RUNS=5000 npx vitest run test/Serialization.test.ts` searches harder. */
const propertyRuns = Number(process.env.PROP_RUNS ?? 60)

describe("properties", () => {
  for (const [name, schema] of Object.entries(messages)) {
    it.prop(`${name}: any valid value survives encode → JSON text → decode unchanged`, [schema], ([value]) => {
      const { decoded, text } = throughJson(schema, value)
      expect(withoutNegativeZero(decoded)).toEqual(withoutNegativeZero(value))
      expect(JSON.stringify(Schema.encodeSync(schema)(decoded))).toBe(text)
    }, { fastCheck: { numRuns: propertyRuns } })

    if (!mayHoldNull.has(name)) {
      it.prop(`${name}: the encoded JSON never holds null (Optional fields are omitted)`, [schema], ([value]) => {
        expect(throughJson(schema, value).text).not.toMatch(/:null\b/)
      }, { fastCheck: { numRuns: propertyRuns } })
    }
  }
})
