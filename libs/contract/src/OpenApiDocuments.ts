/**
 * The published OpenAPI 3.1 documents (bridge contract, Event API, internal API, Integrations area API), generated from the HttpApi classes
 * and enriched with the examples of `Examples.ts`; the Event API's also
 * describes the deliveries a receiver gets (`webhooks`).
 */
import { OpenApi } from "@effect/platform"
import { BridgeApi } from "./BridgeApi.js"
import { EventApi } from "./EventApi.js"
import { InternalApi } from "./InternalApi.js"
import { PortalApi } from "./PortalApi.js"
import * as Examples from "./Examples.js"
import { withExamples } from "./internal/openapi.js"
import { withWebhooks } from "./internal/webhooks.js"

/** Serialization rule 3: receivers accept additional unknown fields. */
const options = { additionalPropertiesStrategy: "allow" } as const

/** Wire examples of each operation's request body and success answer, by operationId. */
const bridgeExamples = {
  capabilities: [Examples.capabilitiesRequest, Examples.capabilitiesResponse],
  contactsSearch: [Examples.contactsSearchRequest, Examples.contactsSearchResponse],
  contactsUpsert: [Examples.contactsUpsertRequest, Examples.contactsUpsertResponse],
  availabilityList: [Examples.availabilityListRequest, Examples.availabilityListResponse],
  appointmentsCreate: [Examples.appointmentsCreateRequest, Examples.appointmentsCreateResponse],
  leadsCreate: [Examples.leadsCreateRequest, Examples.leadsCreateResponse]
} as const

const eventExamples = {
  subscribe: [Examples.subscribeRequest, Examples.subscribeResponse],
  unsubscribe: [undefined, undefined],
  performList: [undefined, [Examples.previewRecord]]
} as const

const componentExamples = {
  Contact: Examples.contact,
  Location: Examples.location,
  Lead: Examples.lead,
  Appointment: Examples.appointment,
  AvailabilityWindow: Examples.availabilityWindow,
  PreviewRecord: Examples.previewRecord,
  Error400: Examples.errorObject,
  Error429: Examples.rateLimitedObject
} as const

/** File names under `libs/contract/openapi/` and how each document is made. */
export const DOCUMENTS = {
  "crm-bridge.openapi.json": () =>
    withExamples(OpenApi.fromApi(BridgeApi, options), bridgeExamples, componentExamples),
  "event-api.openapi.json": () =>
    withWebhooks(withExamples(OpenApi.fromApi(EventApi, options), eventExamples, componentExamples)),
  "internal-api.openapi.json": () => OpenApi.fromApi(InternalApi, options),
  "portal-api.openapi.json": () => OpenApi.fromApi(PortalApi)
} as const

/** The text written to disk: two-space JSON with a final newline. */
export const render = (spec: unknown): string => `${JSON.stringify(spec, null, 2)}\n`
