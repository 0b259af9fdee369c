/**
 * The public Event API as an `HttpApi`: exactly POST /subscribe,
 * DELETE /subscribe/{id} and GET /perform-list, behind an integration key.
 * The server implements it with `HttpApiBuilder`; clients derive from it.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, Schema } from "effect"
import { baseUrlServer, declareRetryAfter, LICENSE, replaceDecodeErrors } from "./internal/openapi.js"
import {
  BadRequest,
  NotFound,
  PerformListParams,
  PreviewList,
  RateLimited,
  SubscribeRequest,
  SubscribeResponse,
  TooLarge,
  Unauthorized,
  Unavailable
} from "./Events.js"

/** An account id (UUID). */
export const AccountId = Schema.UUID.pipe(Schema.brand("AccountId")).annotations({ identifier: "AccountId" })
export type AccountId = typeof AccountId.Type

/** The account (and key) an authenticated Event API request acts for. */
export class CurrentAccount extends Context.Tag("@crm-relay/contract/CurrentAccount")<
  CurrentAccount,
  { readonly accountId: AccountId; readonly keyId: string }
>() {}

/**
 * Integration-key authentication and the per-key rate limit: the account is
 * determined by the key; an invalid or disabled key is 401, the 61st request
 * of a minute is 429. Then, before anything is parsed, a body that is not
 * JSON (or too large or too deep) is 400.
 */
export class IntegrationKeyAuth extends HttpApiMiddleware.Tag<IntegrationKeyAuth>()(
  "@crm-relay/contract/IntegrationKeyAuth",
  {
    failure: Schema.Union(BadRequest.wire, Unauthorized.wire, RateLimited.wire, TooLarge.wire, Unavailable.wire),
    provides: CurrentAccount,
    security: {
      integrationKey: HttpApiSecurity.bearer.pipe(
        HttpApiSecurity.annotate(
          OpenApi.Description,
          "Integration key, created in the account's Integrations area and shown once. " +
            "Keep it in a server-side secret store; never in browser code, a public repository or a URL."
        )
      )
    }
  }
) {}

const subscribe = HttpApiEndpoint.post("subscribe", "/subscribe")
  .setPayload(SubscribeRequest)
  .addSuccess(SubscribeResponse, { status: 201 })
  .addError(BadRequest.wire)
  .annotate(OpenApi.Summary, "Subscribe a receiver")
  .annotate(
    OpenApi.Description,
    "Registers a receiver URL for `lead`, `booking` or `all` events. Not idempotent: repeating creates a " +
      "second subscription (duplicate pushes). Reachability is not tested; a target that is not public HTTPS " +
      "is accepted and never receives a delivery."
  )

const unsubscribe = HttpApiEndpoint.del("unsubscribe", "/subscribe/:id")
  .setPath(Schema.Struct({ id: Schema.String.annotations({ description: "A subscription id owned by the account." }) }))
  .addSuccess(HttpApiSchema.NoContent)
  .addError(NotFound.wire)
  .annotate(OpenApi.Summary, "Unsubscribe")
  .annotate(
    OpenApi.Description,
    "Removes a subscription owned by the authenticated account: 204 with no body. " +
      "An unknown id, an already removed id or another account's id gives 404."
  )

const performList = HttpApiEndpoint.get("performList", "/perform-list")
  .setUrlParams(PerformListParams)
  .addSuccess(PreviewList)
  .addError(BadRequest.wire)
  .annotate(OpenApi.Summary, "Preview recent events")
  .annotate(
    OpenApi.Description,
    "Up to `limit` preview records of the account's latest deliveries (contact holds only `external_id`), " +
      "or one synthetic example when there are none. A 200 proves the key resolves to a live account."
  )

/** The three pairs of the Event API. */
export class EventsGroup extends HttpApiGroup.make("events", { topLevel: true })
  .add(subscribe)
  .add(unsubscribe)
  .add(performList)
  .middleware(IntegrationKeyAuth)
  .annotate(OpenApi.Title, "Events")
  .annotate(OpenApi.Description, "REST-hook subscriptions for lead and booking events, and the setup preview.")
{}

/**
 * Every 400 of this API is the Error object: the server answers request
 * decoding failures with it rather than the framework's own format.
 */
const errorObjectFor400 = replaceDecodeErrors({
  description: "The request could not be accepted; fix the body or query.",
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error400" } } }
})

/** The public Event API. */
export class EventApi extends HttpApi.make("event-api")
  .add(EventsGroup)
  .annotate(OpenApi.Title, "crm-relay Event API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "Public REST-hook API: subscribe a public HTTPS receiver to `lead` and `booking` events, remove a " +
      "subscription, and preview recent events. Every call carries `Authorization: Bearer <integration key>`; " +
      "the account comes from the key. 60 requests per key per minute. Errors are the Error object " +
      "`{\"error\": \"One sentence.\"}`; every other path or method is 404."
  )
  .annotate(OpenApi.License, LICENSE)
  .annotate(OpenApi.Servers, baseUrlServer("https://events.example.com", "The Event API's public HTTPS address (the server's PORT, behind your TLS proxy)."))
  .annotate(OpenApi.Transform, (spec) => declareRetryAfter(errorObjectFor400(spec)))
{}
