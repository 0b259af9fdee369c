/**
 * The svc.crm.v1 REST transport as an `HttpApi`: six HTTPS POST endpoints
 * appended to `{bridge_base_url}`. The reference bridge implements it; the
 * published OpenAPI document is generated from it.
 */
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiError,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "@effect/platform"
import { Context, Schema } from "effect"
import {
  AppointmentsCreateRequest,
  AppointmentsCreateResponse,
  AvailabilityListRequest,
  AvailabilityListResponse,
  CapabilitiesRequest,
  CapabilitiesResponse,
  ContactsSearchRequest,
  ContactsSearchResponse,
  ContactsUpsertRequest,
  ContactsUpsertResponse,
  LeadsCreateRequest,
  LeadsCreateResponse,
  REST_PATHS
} from "./Operations.js"
import { LICENSE, replaceDecodeErrors } from "./internal/openapi.js"
import { IdempotencyKey } from "./Values.js"

/** 429 from a bridge: transient; `Retry-After` is honoured up to five minutes. */
export class TooManyRequests extends HttpApiSchema.EmptyError<TooManyRequests>()({
  tag: "TooManyRequests",
  status: 429
}) {}

/** The tenant the presented credential belongs to (Authentication rule 4). */
export class AuthorizedTenant extends Context.Tag("@crm-relay/contract/AuthorizedTenant")<
  AuthorizedTenant,
  { readonly tenantId: string }
>() {}

/** Every bridge request carries `Authorization: Bearer <API key or access token>`. */
export class BridgeAuthorization extends HttpApiMiddleware.Tag<BridgeAuthorization>()(
  "@crm-relay/contract/BridgeAuthorization",
  {
    failure: HttpApiError.Unauthorized,
    provides: AuthorizedTenant,
    security: {
      bridgeCredential: HttpApiSecurity.bearer.pipe(
        HttpApiSecurity.annotate(
          OpenApi.Description,
          "An API key (visible ASCII, no spaces) or an OAuth 2.0 client-credentials access token. " +
            "The credential is bound to one client tenant; a mismatch with `tenant_id` is rejected."
        )
      )
    }
  }
) {}

/** The `Idempotency-Key` header of write operations; the same value as the body's `idempotency_key`. */
export const WriteHeaders = Schema.Struct({
  "idempotency-key": IdempotencyKey
})

const read = <const Name extends string, Req extends Schema.Schema.Any, Res extends Schema.Schema.Any>(
  name: Name,
  path: HttpApiEndpoint.PathSegment,
  request: Req,
  response: Res
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(request)
    .addSuccess(response)
    .addError(HttpApiError.BadRequest)
    .addError(TooManyRequests)
    .addError(HttpApiError.ServiceUnavailable)

const write = <const Name extends string, Req extends Schema.Schema.Any, Res extends Schema.Schema.Any>(
  name: Name,
  path: HttpApiEndpoint.PathSegment,
  request: Req,
  response: Res
) => read(name, path, request, response).setHeaders(WriteHeaders)

/** The six operations. */
export class BridgeGroup extends HttpApiGroup.make("bridge", { topLevel: true })
  .add(
    read("capabilities", REST_PATHS["capabilities"], CapabilitiesRequest, CapabilitiesResponse)
      .annotate(OpenApi.Summary, "capabilities")
      .annotate(
        OpenApi.Description,
        "Returns the exact contract version and only supported operation names. Connecting runs this check " +
          "only; it creates no contact, lead or appointment."
      )
  )
  .add(
    read("contactsSearch", REST_PATHS["contacts.search"], ContactsSearchRequest, ContactsSearchResponse)
      .annotate(OpenApi.Summary, "contacts.search")
      .annotate(OpenApi.Description, "Finds a contact by phone or email. Never invents a match: null when nothing matches.")
  )
  .add(
    write("contactsUpsert", REST_PATHS["contacts.upsert"], ContactsUpsertRequest, ContactsUpsertResponse)
      .annotate(OpenApi.Summary, "contacts.upsert")
      .annotate(
        OpenApi.Description,
        "Matches by phone or email identity before creating. `is_new` is a real boolean. Replaying the " +
          "idempotency key returns the original record."
      )
  )
  .add(
    read("availabilityList", REST_PATHS["availability.list"], AvailabilityListRequest, AvailabilityListResponse)
      .annotate(OpenApi.Summary, "availability.list")
      .annotate(
        OpenApi.Description,
        "At most 50 real openings inside the requested interval, each with end after start. A read does not " +
          "reserve capacity."
      )
  )
  .add(
    write("appointmentsCreate", REST_PATHS["appointments.create"], AppointmentsCreateRequest, AppointmentsCreateResponse)
      .addError(HttpApiError.Conflict)
      .annotate(OpenApi.Summary, "appointments.create")
      .annotate(
        OpenApi.Description,
        "Checks capacity and creates atomically. The receipt is confirmed and its start and end equal the " +
          "requested instants exactly; 409 when the slot is taken, never a receipt for a different time."
      )
  )
  .add(
    write("leadsCreate", REST_PATHS["leads.create"], LeadsCreateRequest, LeadsCreateResponse)
      .annotate(OpenApi.Summary, "leads.create")
      .annotate(
        OpenApi.Description,
        "Creates a lead, or returns the existing lead for the same idempotency key. A generic acknowledgement " +
          "such as `ok: true` is not a receipt."
      )
  )
  .middleware(BridgeAuthorization)
  .annotate(OpenApi.Title, "svc.crm.v1")
  .annotate(OpenApi.Description, "The six bridge operations: each an HTTPS POST of a JSON object to its path under `{bridge_base_url}`.")
{}

/** The Custom CRM Bridge contract (svc.crm.v1), REST transport. */
export class BridgeApi extends HttpApi.make("crm-bridge")
  .add(BridgeGroup)
  .annotate(OpenApi.Title, "Custom CRM Bridge Contract (svc.crm.v1)")
  .annotate(OpenApi.Version, "svc.crm.v1")
  .annotate(
    OpenApi.Description,
    "The contract by which crm-relay calls a customer-owned HTTPS bridge in front of a CRM. All operations " +
      "are HTTPS POST of JSON objects appended to `{bridge_base_url}`; every body carries `tenant_id` and " +
      "`contract_version`. Write operations carry a 64-hex `idempotency_key`, also sent as the " +
      "`Idempotency-Key` header. A 2xx answer must carry the operation's receipt; 409 is a conflict, 429 and " +
      "5xx are transient (Retry-After honoured up to five minutes), 401 is an authentication failure, other " +
      "4xx and redirects are permanent. Remote error bodies are never relied on. Limits: 10 s per exchange, " +
      "1 MiB request and response bodies, uncompressed JSON. The same operations are available as MCP tools " +
      "(Streamable HTTP, protocol 2026-07-28): svc_capabilities, svc_contacts_search, svc_contacts_upsert, " +
      "svc_availability_list, svc_appointments_create, svc_leads_create."
  )
  .annotate(
    OpenApi.Transform,
    replaceDecodeErrors({ description: "Permanent: the request is not valid for this contract. No error body is relied on." })
  )
  .annotate(OpenApi.License, LICENSE)
  .annotate(OpenApi.Servers, [{ url: "{bridge_base_url}", variables: { bridge_base_url: { default: "https://bridge.example.com/crm" } } }])
{}
