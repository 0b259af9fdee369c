import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as Events from "../src/Events.js"
import * as Examples from "../src/Examples.js"
import * as Operations from "../src/Operations.js"
import * as Resources from "../src/Resources.js"

/** Each published example and the Schema it must satisfy. */
const pairs: ReadonlyArray<readonly [string, Schema.Schema<any, any>, unknown]> = [
  ["contact", Resources.Contact, Examples.contact],
  ["location", Resources.Location, Examples.location],
  ["lead", Resources.Lead, Examples.lead],
  ["appointment", Resources.Appointment, Examples.appointment],
  ["availabilityWindow", Resources.AvailabilityWindow, Examples.availabilityWindow],
  ["capabilitiesRequest", Operations.CapabilitiesRequest, Examples.capabilitiesRequest],
  ["capabilitiesResponse", Operations.CapabilitiesResponse, Examples.capabilitiesResponse],
  ["contactsSearchRequest", Operations.ContactsSearchRequest, Examples.contactsSearchRequest],
  ["contactsSearchResponse", Operations.ContactsSearchResponse, Examples.contactsSearchResponse],
  ["contactsUpsertRequest", Operations.ContactsUpsertRequest, Examples.contactsUpsertRequest],
  ["contactsUpsertResponse", Operations.ContactsUpsertResponse, Examples.contactsUpsertResponse],
  ["availabilityListRequest", Operations.AvailabilityListRequest, Examples.availabilityListRequest],
  ["availabilityListResponse", Operations.AvailabilityListResponse, Examples.availabilityListResponse],
  ["appointmentsCreateRequest", Operations.AppointmentsCreateRequest, Examples.appointmentsCreateRequest],
  ["appointmentsCreateResponse", Operations.AppointmentsCreateResponse, Examples.appointmentsCreateResponse],
  ["leadsCreateRequest", Operations.LeadsCreateRequest, Examples.leadsCreateRequest],
  ["leadsCreateResponse", Operations.LeadsCreateResponse, Examples.leadsCreateResponse],
  ["subscribeRequest", Events.SubscribeRequest, Examples.subscribeRequest],
  ["subscribeResponse", Events.SubscribeResponse, Examples.subscribeResponse],
  ["previewRecord", Events.PreviewRecord, Examples.previewRecord],
  ["leadEvent", Events.LeadEvent, Examples.leadEvent],
  ["bookingEvent", Events.BookingEvent, Examples.bookingEvent],
  ["errorObject", Events.ErrorObject, Examples.errorObject],
  ["rateLimitedObject", Events.ErrorObject, Examples.rateLimitedObject]
]

describe("published examples", () => {
  it("every example is listed here", () => {
    expect(pairs.map(([name]) => name).sort()).toEqual(Object.keys(Examples).sort())
  })

  it.each(pairs)("%s decodes with its Schema and encodes back to the same wire form", (_, schema, example) => {
    expect(Schema.encodeSync(schema)(Schema.decodeUnknownSync(schema)(example))).toEqual(example)
  })
})
