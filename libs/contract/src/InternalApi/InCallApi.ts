/**
 * The in-call API on the internal API: what the voice agent asks the
 * customer's CRM during a call. Each route runs one bridge exchange within
 * the in-call budget and answers 200 with `{ok: true, ...receipt}` or
 * `{ok: false, reason, message}` (reasons: conflict, unavailable, timeout,
 * rejected, not_configured; see `@crm-relay/calls/InCall`). Every mistake
 * of the voice agent's input comes in that one shape, which it acts on
 * mid-call: a body that is not JSON, too large, missing a field or with a
 * field of the wrong type is `rejected` with a message naming the field, as
 * is input the contract refuses (a timestamp without offset); an unknown
 * account is `not_configured`. Only a missing or wrong admin token is an
 * HTTP error (401).
 *
 * The group gets the admin-token middleware where InternalApi adds it.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import * as InCall from "../InCall.js"
import { Schema } from "effect"

const path = Schema.Struct({ id: Schema.String, tenantId: Schema.String })

/** contacts.search, contacts.upsert, availability.list and appointments.create, in-call. */
export class InCallGroup extends HttpApiGroup.make("inCall")
  .add(
    HttpApiEndpoint.post("contactsSearch", "/v1/accounts/:id/tenants/:tenantId/contacts/search")
      .annotate(OpenApi.Summary, "Find a CRM contact during a call")
      .setPath(path)
      .setPayload(InCall.ContactsSearchRequest)
      .addSuccess(InCall.ContactsSearchAnswer)
  )
  .add(
    HttpApiEndpoint.post("contactsUpsert", "/v1/accounts/:id/tenants/:tenantId/contacts/upsert")
      .annotate(OpenApi.Summary, "Create or update a CRM contact during a call")
      .setPath(path)
      .setPayload(InCall.ContactsUpsertRequest)
      .addSuccess(InCall.ContactsUpsertAnswer)
  )
  .add(
    HttpApiEndpoint.post("availability", "/v1/accounts/:id/tenants/:tenantId/availability")
      .annotate(OpenApi.Summary, "List open appointment slots during a call")
      .setPath(path)
      .setPayload(InCall.AvailabilityRequest)
      .addSuccess(InCall.AvailabilityAnswer)
  )
  .add(
    HttpApiEndpoint.post("appointments", "/v1/accounts/:id/tenants/:tenantId/appointments")
      .annotate(OpenApi.Summary, "Book an appointment during a call")
      .setPath(path)
      .setPayload(InCall.AppointmentRequest)
      .addSuccess(InCall.AppointmentAnswer)
  )
  // Refused input is answered `{ok: false, reason: "rejected", message}` (200), never the framework's 400.
  .annotateEndpoints(OpenApi.Transform, (operation) => {
    const { "400": _, ...responses } = operation["responses"] ?? {}
    return { ...operation, responses }
  })
  .annotate(OpenApi.Description, "CRM operations during a call; every mistake is answered `{ok: false, reason, message}`.")
{}
