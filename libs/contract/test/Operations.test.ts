import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import * as Examples from "../src/Examples.js"
import {
  AppointmentsCreateResponse,
  AvailabilityListResponse,
  CapabilitiesResponse,
  ContactsSearchResponse,
  ContactsUpsertRequest,
  ContactsUpsertResponse,
  LeadsCreateResponse,
  OPERATION_BY_TOOL,
  OPERATIONS,
  TOOL_NAMES
} from "../src/Operations.js"
import { describeParseError, InvalidInput, validateAppointment } from "../src/Validation.js"

const refusal = <A, I>(schema: Schema.Schema<A, I>, input: unknown): string =>
  Either.match(Schema.decodeUnknownEither(schema)(input), { onLeft: describeParseError, onRight: () => "accepted" })

const capabilities = (operations: ReadonlyArray<string>, closes = true, version = "svc.crm.v1") => ({
  contract_version: version,
  operations,
  booking_closes_availability: closes
})

describe("capabilities (Operation rule 1)", () => {
  it("the example answer is accepted", () => {
    expect(refusal(CapabilitiesResponse, Examples.capabilitiesResponse)).toBe("accepted")
  })

  it("Versioning rule 1: the exact contract version is required", () => {
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "leads.create"], true, "svc.crm.v2")))
      .toMatch(/contract_version/)
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "leads.create"], true, "SVC.CRM.V1")))
      .not.toBe("accepted")
  })

  it("only known operation names: an unknown name is refused", () => {
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "leads.create", "contacts.delete"])))
      .toMatch(/operations/)
  })

  it("the list includes contacts.upsert", () => {
    expect(refusal(CapabilitiesResponse, capabilities(["leads.create"]))).toMatch(/contacts\.upsert/)
  })

  it("the list includes at least one of leads.create or appointments.create", () => {
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "contacts.search"])))
      .toMatch(/leads\.create or appointments\.create/)
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "appointments.create"]))).toBe("accepted")
  })

  it("availability.list advertised ⇒ appointments.create implemented and booking_closes_availability true", () => {
    expect(refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "leads.create", "availability.list"])))
      .toMatch(/availability\.list requires appointments\.create/)
    expect(
      refusal(CapabilitiesResponse, capabilities(["contacts.upsert", "appointments.create", "availability.list"], false))
    ).toMatch(/booking_closes_availability = true/)
  })
})

describe("receipts", () => {
  it("Operation rule 2: search answers {contact: {id}} or {contact: null}; a missing contact is refused", () => {
    expect(refusal(ContactsSearchResponse, { contact: null })).toBe("accepted")
    expect(refusal(ContactsSearchResponse, { contact: { id: "c-1", name: "extra" } })).toBe("accepted")
    expect(refusal(ContactsSearchResponse, {})).toMatch(/contact/)
    expect(refusal(ContactsSearchResponse, { contact: { id: " " } })).toMatch(/blank/)
  })

  it("Operation rule 3: is_new as a string (\"false\") is invalid", () => {
    expect(refusal(ContactsUpsertResponse, { id: "c-1", is_new: false })).toBe("accepted")
    expect(refusal(ContactsUpsertResponse, { id: "c-1", is_new: "false" })).toMatch(/is_new.*Expected boolean/)
    expect(refusal(ContactsUpsertResponse, { id: "", is_new: true })).toMatch(/id: must not be blank/)
  })

  it("Operation rule 4: at most 50 slots, each with end after start", () => {
    const slot = (hour: number) => ({
      start: `2026-03-02T${String(hour % 24).padStart(2, "0")}:00:00Z`,
      end: `2026-03-02T${String(hour % 24).padStart(2, "0")}:30:00Z`,
      timezone: "UTC"
    })
    const fifty = Array.from({ length: 50 }, (_, i) => slot(i))
    expect(refusal(AvailabilityListResponse, { slots: fifty })).toBe("accepted")
    expect(refusal(AvailabilityListResponse, { slots: [...fifty, slot(3)] })).toMatch(/at most 50 slots/)
    expect(
      refusal(AvailabilityListResponse, {
        slots: [{ start: "2026-03-02T10:00:00Z", end: "2026-03-02T10:00:00Z", timezone: "UTC" }]
      })
    ).toMatch(/slot end must be after its start/)
  })

  it("Operation rule 5: confirmed must be true, the id nonblank, timestamps offset-aware, the zone valid", () => {
    const ok = Examples.appointmentsCreateResponse
    expect(refusal(AppointmentsCreateResponse, ok)).toBe("accepted")
    expect(refusal(AppointmentsCreateResponse, { ...ok, confirmed: false })).toMatch(/confirmed/)
    expect(refusal(AppointmentsCreateResponse, { ...ok, confirmed: "true" })).toMatch(/confirmed/)
    expect(refusal(AppointmentsCreateResponse, { ...ok, id: "" })).toMatch(/blank/)
    expect(refusal(AppointmentsCreateResponse, { ...ok, start: undefined })).toMatch(/start/)
    expect(refusal(AppointmentsCreateResponse, { ...ok, end: "2026-03-02T10:00:00" })).toMatch(/offset/)
    expect(refusal(AppointmentsCreateResponse, { ...ok, timezone: "Central Time" })).toMatch(/IANA/)
  })

  it("Operation rule 6: a generic acknowledgement such as ok:true is not a receipt", () => {
    expect(refusal(LeadsCreateResponse, { id: "lead-1" })).toBe("accepted")
    expect(refusal(LeadsCreateResponse, { ok: true })).toMatch(/id/)
    expect(refusal(LeadsCreateResponse, {})).toMatch(/id/)
  })
})

describe("requests", () => {
  it("a contact upsert needs at least one usable phone or email", () => {
    const request = Examples.contactsUpsertRequest
    expect(refusal(ContactsUpsertRequest, request)).toBe("accepted")
    expect(refusal(ContactsUpsertRequest, { ...request, contact: { ...request.contact, phones: [" "], emails: [] } }))
      .toMatch(/at least one usable phone or email/)
  })

  it.effect("Operation rule 7: an appointment whose end is not after its start is refused before sending", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        validateAppointment({ ...Examples.appointment, end: Examples.appointment.start })
      )
      expect(error).toBeInstanceOf(InvalidInput)
      expect(error.message).toBe("appointment refused: end: end must be after start")
    }))

  it.effect("Operation rule 7: a timestamp without an offset is refused before sending", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(validateAppointment({ ...Examples.appointment, start: "2026-03-02T09:00:00" }))
      expect(error._tag).toBe("InvalidInput")
      expect(error.message).toMatch(/^appointment refused: start: expected an ISO 8601 instant with an explicit UTC offset/)
    }))

  it.effect("a valid appointment passes validation unchanged", () =>
    Effect.gen(function*() {
      const appointment = yield* validateAppointment(Examples.appointment)
      expect(appointment).toEqual(Examples.appointment)
    }))
})

describe("MCP tool names", () => {
  it("each of the six operations has exactly its tool name from the contract's table", () => {
    expect(TOOL_NAMES).toEqual({
      "capabilities": "svc_capabilities",
      "contacts.search": "svc_contacts_search",
      "contacts.upsert": "svc_contacts_upsert",
      "availability.list": "svc_availability_list",
      "appointments.create": "svc_appointments_create",
      "leads.create": "svc_leads_create"
    })
    for (const op of OPERATIONS) expect(OPERATION_BY_TOOL[TOOL_NAMES[op]]).toBe(op)
  })
})
