/**
 * The internal API (ADMIN_HOST:ADMIN_PORT) as an `HttpApi`: the server
 * implements it and the CLI calls it with `HttpApiClient`. Everything except
 * the health probes needs `Authorization: Bearer <ADMIN_TOKEN>`. Errors are
 * the Error object, as on the public API: the contract's, and this API's own
 * (409, 422, 503, ...) declared with `Events.errorObject`, which the
 * Error-object middleware answers by their declared status.
 *
 * The call pipeline's groups (outcomes, routing, pushes, connections,
 * signing secret, master key, in-call, deliveries) are defined in `api/`.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity } from "@effect/platform"
import { Events } from "@crm-relay/contract"
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import { Schema } from "effect"
import * as CallsApi from "./api/CallsApi.js"
import * as ConnectionsApi from "./api/ConnectionsApi.js"
import * as DeliveriesApi from "./api/DeliveriesApi.js"
import * as InCallApi from "./api/InCallApi.js"
import * as ListingsApi from "./api/ListingsApi.js"
import { SubscriptionLifecycleGroup } from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"

/** Bearer `ADMIN_TOKEN`. */
export class AdminAuth extends HttpApiMiddleware.Tag<AdminAuth>()("@crm-relay/server/AdminAuth", {
  failure: Events.Unauthorized.wire,
  security: { adminToken: HttpApiSecurity.bearer }
}) {}

/** The 404 of the routes under /v1/accounts/{id} when no account has that id. */
export const unknownAccount = () => new Events.NotFound({ error: "No account with this id exists." })

/** 503 from /readyz: a dependency (the database) does not answer. */
export class NotReady extends Schema.TaggedError<NotReady>()("NotReady", { error: Schema.String }) {
  static readonly wire = Events.errorObject(this, 503, "Not ready: the database does not answer.", "NotReadyError")
}

/** POST /v1/accounts body: `mode` defaults to `live`. */
export const CreateAccountRequest = Schema.Struct({
  name: Accounts.AccountName,
  mode: Schema.optionalWith(Accounts.AccountMode, { exact: true, default: () => "live" as const })
}).annotations({ identifier: "CreateAccountRequest" })

/** POST /v1/accounts/{id}/keys answer: the only time the key is shown. */
export const CreatedKey = Schema.Struct({
  id: IntegrationKeys.IntegrationKeyId,
  key: Schema.String
}).annotations({ identifier: "CreatedKey" })

/** A migration applied by POST /v1/migrations. */
export const AppliedMigration = Schema.Struct({ id: Schema.Int, name: Schema.String })

const ok = Schema.Struct({ status: Schema.Literal("ok") })
const ready = Schema.Struct({ status: Schema.Literal("ready"), database: Schema.Literal("postgres", "pglite") })

/** Accounts and their integration keys. */
export class AccountsGroup extends HttpApiGroup.make("accounts")
  .add(
    HttpApiEndpoint.post("create", "/v1/accounts")
      .setPayload(CreateAccountRequest)
      .addSuccess(Accounts.Account, { status: 201 })
      .addError(Events.BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.post("createKey", "/v1/accounts/:id/keys")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(CreatedKey, { status: 201 })
      .addError(Events.NotFound.wire)
  )
  .middleware(AdminAuth)
{}

/** Integration keys by id. */
export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.post("disable", "/v1/keys/:keyId/disable")
      .setPath(Schema.Struct({ keyId: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Events.NotFound.wire)
  )
  .middleware(AdminAuth)
{}

/** Operations: migrations (already run at start; idempotent). */
export class OperationsGroup extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.post("migrate", "/v1/migrations").addSuccess(Schema.Struct({ applied: Schema.Array(AppliedMigration) }))
  )
  .middleware(AdminAuth)
{}

/** Liveness and readiness probes (no token). */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("healthz", "/healthz").addSuccess(ok))
  .add(HttpApiEndpoint.get("readyz", "/readyz").addSuccess(ready).addError(NotReady.wire))
{}

/** The internal API. */
export class InternalApi extends HttpApi.make("internal-api")
  .add(AccountsGroup)
  .add(KeysGroup)
  .add(OperationsGroup)
  .add(HealthGroup)
  .add(CallsApi.OutcomesGroup.middleware(AdminAuth))
  .add(CallsApi.RoutingGroup.middleware(AdminAuth))
  .add(CallsApi.PushesGroup.middleware(AdminAuth))
  .add(ConnectionsApi.ConnectionsGroup.middleware(AdminAuth))
  .add(ConnectionsApi.SigningSecretGroup.middleware(AdminAuth))
  .add(ConnectionsApi.MasterKeyGroup.middleware(AdminAuth))
  .add(InCallApi.InCallGroup.middleware(AdminAuth))
  .add(DeliveriesApi.DeliveriesGroup.middleware(AdminAuth))
  .add(ListingsApi.AccountListingGroup.middleware(AdminAuth))
  .add(ListingsApi.ConnectionListingGroup.middleware(AdminAuth))
  .add(ListingsApi.DeliverySearchGroup.middleware(AdminAuth))
  .add(SubscriptionLifecycleGroup.middleware(AdminAuth))
{}
