/**
 * The internal API (ADMIN_HOST:ADMIN_PORT) as an `HttpApi`: the server
 * implements it and the CLI calls it with `HttpApiClient`. Everything except
 * the health probes needs `Authorization: Bearer <ADMIN_TOKEN>`. Errors are
 * the Error object, as on the public API: the contract's, and this API's own
 * (409, 422, 503, ...) declared with `Events.errorObject`, which the
 * Error-object middleware answers by their declared status.
 *
 * The call pipeline's groups (outcomes, routing, pushes, connections,
 * signing secret, master key, in-call, deliveries) are defined in `InternalApi/`.
 */
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "@effect/platform"
import * as Accounts from "./Accounts.js"
import * as Events from "./Events.js"
import { baseUrlServer, LICENSE } from "./internal/openapi.js"
import { Schema } from "effect"
import * as CallsApi from "./InternalApi/CallsApi.js"
import * as ConnectionsApi from "./InternalApi/ConnectionsApi.js"
import * as DeliveriesApi from "./InternalApi/DeliveriesApi.js"
import { DestinationsGroup } from "./InternalApi/DestinationsApi.js"
import * as InCallApi from "./InternalApi/InCallApi.js"
import * as ListingsApi from "./InternalApi/ListingsApi.js"
import { SubscriptionLifecycleGroup } from "./InternalApi/SubscriptionLifecycleApi.js"
import { PortalSessionsGroup } from "./InternalApi/PortalSessionsApi.js"

/** Bearer `ADMIN_TOKEN`. */
export class AdminAuth extends HttpApiMiddleware.Tag<AdminAuth>()("@crm-relay/server/AdminAuth", {
  failure: Events.Unauthorized.wire,
  security: { adminToken: HttpApiSecurity.bearer }
}) {}

/** The 404 of the routes under /v1/accounts/{id} when no account has that id. */
export const unknownAccount = () => new Events.NotFound({ error: "No account with this id exists." })

/** 503 from /readyz: the server is starting or stopping, the database does not answer, or the embedded database's disk is full. */
export class NotReady extends Schema.TaggedError<NotReady>()("NotReady", { error: Schema.String }) {
  static readonly wire = Events.errorObject(
    this,
    503,
    "Not ready: the server is starting (not every listener is up) or stopping, the database does not answer, or the embedded database's disk is full.",
    "NotReadyError"
  )
}

/** POST /v1/accounts body: `mode` defaults to `live`. */
export const CreateAccountRequest = Schema.Struct({
  name: Accounts.AccountName,
  mode: Schema.optionalWith(Accounts.AccountMode, { exact: true, default: () => "live" as const })
}).annotations({ identifier: "CreateAccountRequest" })

/** POST /v1/accounts/{id}/keys answer: the only time the key is shown. */
export const CreatedKey = Schema.Struct({
  id: Accounts.IntegrationKeyId,
  key: Schema.String
}).annotations({ identifier: "CreatedKey" })

/** A migration applied by POST /v1/migrations. */
export const AppliedMigration = Schema.Struct({ id: Schema.Int, name: Schema.String })

/** A migration recorded in the database, with when it was applied. */
export const RecordedMigration = Schema.Struct({ id: Schema.Int, name: Schema.String, applied_at: Schema.String })

/** GET /v1/migrations: what the database holds against what this build knows. */
export const MigrationStatus = Schema.Struct({
  applied: Schema.Array(RecordedMigration),
  pending: Schema.Array(AppliedMigration),
  /** Recorded but unknown to this build: written by a newer release. */
  unknown: Schema.Array(RecordedMigration)
}).annotations({ identifier: "MigrationStatus" })

const ok = Schema.Struct({ status: Schema.Literal("ok") })
const ready = Schema.Struct({ status: Schema.Literal("ready"), database: Schema.Literal("postgres", "pglite") })

/** Accounts and their integration keys. */
export class AccountsGroup extends HttpApiGroup.make("accounts")
  .add(
    HttpApiEndpoint.post("create", "/v1/accounts")
      .annotate(OpenApi.Summary, "Create an account")
      .setPayload(CreateAccountRequest)
      .addSuccess(Accounts.Account, { status: 201 })
      .addError(Events.BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.post("createKey", "/v1/accounts/:id/keys")
      .annotate(OpenApi.Summary, "Create an integration key")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(CreatedKey, { status: 201 })
      .addError(Events.NotFound.wire)
  )
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Accounts and the integration keys they are created with.")
{}

/** Integration keys by id. */
export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.post("disable", "/v1/keys/:keyId/disable")
      .annotate(OpenApi.Summary, "Disable an integration key")
      .setPath(Schema.Struct({ keyId: Schema.String }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Events.NotFound.wire)
  )
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Integration keys by id.")
{}

/** Operations: migrations (already run at start; idempotent), what is applied, pending or unknown, and backups. */
export class OperationsGroup extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.post("migrate", "/v1/migrations")
      .annotate(OpenApi.Summary, "Apply pending database migrations")
      .addSuccess(Schema.Struct({ applied: Schema.Array(AppliedMigration) }))
  )
  .add(
    HttpApiEndpoint.get("backup", "/v1/backup")
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/gzip" }))
      .annotate(OpenApi.Summary, "Stream a consistent backup of the database")
      .annotate(
        OpenApi.Description,
        "A gzip'd crm-relay backup (what `crm-relay db backup` writes), taken from one snapshot while the server " +
          "goes on serving. It holds the sealed secrets, never the master key. `crm-relay db backup` uses this route " +
          "when the server holds the embedded database. A failure half-way ends the body early: the file then has no " +
          "manifest and is refused whole."
      )
  )
  .add(
    HttpApiEndpoint.get("migrationStatus", "/v1/migrations")
      .annotate(OpenApi.Summary, "List applied, pending and unknown database migrations")
      .addSuccess(MigrationStatus)
  )
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Database schema migrations.")
{}

/** Liveness and readiness probes (no token). */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("healthz", "/healthz").annotate(OpenApi.Summary, "Liveness probe").addSuccess(ok))
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .annotate(OpenApi.Summary, "Readiness probe")
      .addSuccess(ready).addError(NotReady.wire)
  )
  .annotate(OpenApi.Description, "Liveness and readiness probes; no token needed.")
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
  .add(DestinationsGroup.middleware(AdminAuth))
  .add(PortalSessionsGroup.middleware(AdminAuth))
  .annotate(OpenApi.Title, "crm-relay internal API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "The operator's and the call-handling service's API (ADMIN_HOST:ADMIN_PORT, never public): accounts, " +
      "integration keys, call outcomes, routing rules, CRM push jobs, bridge connections, in-call operations, " +
      "webhook deliveries, the listings, the receiver lifecycle (subscription state, disable, enable, recover) and event destinations. Everything except /healthz and /readyz needs " +
      "`Authorization: Bearer <ADMIN_TOKEN>`. Errors are the Error object `{\"error\": \"One sentence.\"}`."
  )
  .annotate(OpenApi.License, LICENSE)
  .annotate(OpenApi.Servers, baseUrlServer("http://127.0.0.1:8081", "The internal API's address: http://ADMIN_HOST:ADMIN_PORT (never public)."))
{}
