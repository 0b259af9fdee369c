/**
 * The in-call API on the internal API: what the voice agent asks the
 * customer's CRM during a call. Each route runs one bridge exchange within
 * the in-call budget and answers 200 with `{ok: true, ...receipt}` or
 * `{ok: false, reason, message}` (reasons: conflict, unavailable, timeout,
 * rejected, not_configured; see `@crm-relay/calls/InCall`). A body whose
 * shape is wrong is 400 naming the field; an unknown account is 404.
 *
 * The group gets the admin-token middleware where InternalApi adds it.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import * as Events from "../Events.js"
import * as InCall from "../InCall.js"
import { Schema } from "effect"

const path = Schema.Struct({ id: Schema.String, tenantId: Schema.String })

/** contacts.search, contacts.upsert, availability.list and appointments.create, in-call. */
export class InCallGroup extends HttpApiGroup.make("inCall")
  .add(
    HttpApiEndpoint.post("contactsSearch", "/v1/accounts/:id/tenants/:tenantId/contacts/search")
      .setPath(path)
      .setPayload(InCall.ContactsSearchRequest)
      .addSuccess(InCall.ContactsSearchAnswer)
  )
  .add(
    HttpApiEndpoint.post("contactsUpsert", "/v1/accounts/:id/tenants/:tenantId/contacts/upsert")
      .setPath(path)
      .setPayload(InCall.ContactsUpsertRequest)
      .addSuccess(InCall.ContactsUpsertAnswer)
  )
  .add(
    HttpApiEndpoint.post("availability", "/v1/accounts/:id/tenants/:tenantId/availability")
      .setPath(path)
      .setPayload(InCall.AvailabilityRequest)
      .addSuccess(InCall.AvailabilityAnswer)
  )
  .add(
    HttpApiEndpoint.post("appointments", "/v1/accounts/:id/tenants/:tenantId/appointments")
      .setPath(path)
      .setPayload(InCall.AppointmentRequest)
      .addSuccess(InCall.AppointmentAnswer)
  )
  // Every route: a body of the wrong shape (400 naming the field), an unknown account (404).
  .addError(Events.BadRequest.wire)
  .addError(Events.NotFound.wire)
{}
