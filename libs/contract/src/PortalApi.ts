/**
 * The Integrations area's API (PORTAL_HOST:PORTAL_PORT, under `/api`): what
 * the account's own web page reads and changes. The server implements it,
 * the page calls it with `HttpApiClient` derived from these classes, and its
 * OpenAPI document is generated from them.
 *
 * Access: a single-use link minted by the operator (`POST
 * /v1/accounts/{id}/portal-sessions` on the internal API) opens a session
 * bound to one account; its cookie authenticates every call here. Every
 * change (any method but GET) also carries the session's CSRF token in the
 * `x-csrf-token` header. Times are ISO 8601 strings. Errors are the Error
 * object `{error}` (with `next_step` or `field` where they help).
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequest, errorObject, NotFound } from "./Events.js"
import { Report as ConformanceReport } from "./Conformance.js"
import { AuthRequest } from "./InternalApi/ConnectionsApi.js"
import { baseUrlServer, LICENSE } from "./internal/openapi.js"
import { CapabilitiesResponse } from "./Operations.js"
import {
  RecoverRequest,
  RecoveryView,
  SubscriptionDisabled,
  SubscriptionState,
  ToggleAnswer
} from "./InternalApi/SubscriptionLifecycleApi.js"
import { ActivityGroup } from "./PortalApi/ActivityApi.js"
import { DestinationsGroup } from "./PortalApi/DestinationsApi.js"
import { PortalAuth } from "./PortalApi/PortalAuth.js"

// The groups kept in files of their own, and the session middleware, read from here as before.
export * from "./PortalApi/ActivityApi.js"
export * from "./PortalApi/DestinationsApi.js"
export * from "./PortalApi/PortalAuth.js"

/** 409: demo and sandbox accounts cannot connect a real CRM. */
export class ConnectionNotAllowed extends Schema.TaggedError<ConnectionNotAllowed>()("ConnectionNotAllowed", { error: Schema.String }) {
  static readonly wire = errorObject(this, 409, "Demo and sandbox accounts cannot connect a bridge to a real CRM.", "PortalConnectionNotAllowedError")
}

/** 400 of the connection form: one sentence and the form field at fault, when one is. */
export class InvalidConnection extends Schema.TaggedError<InvalidConnection>()("InvalidConnection", {
  error: Schema.String,
  field: Schema.optionalWith(Schema.String, { exact: true })
}) {
  static readonly wire = errorObject(this, 400, "The connection form is invalid; `field` names the form field.", "PortalConnectionInvalidError")
}

/**
 * 422: the capabilities check did not pass (the bridge refused, answered
 * wrongly, or could not be reached); `error` says what happened in plain
 * words and `next_step` what to do. Nothing was stored.
 */
export class CheckFailed extends Schema.TaggedError<CheckFailed>()("CheckFailed", {
  error: Schema.String,
  next_step: Schema.optionalWith(Schema.String, { exact: true })
}) {
  static readonly wire = errorObject(this, 422, "The capabilities check did not pass; nothing was stored.", "PortalCheckFailedError")
}

// ---------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------

/** Account modes (live reaches a real CRM; demo and sandbox never do). */
export const AccountMode = Schema.Literal("live", "demo", "sandbox")

/** GET /api/session: whose page this is, the CSRF token for changes, and when the session ends. */
export const SessionView = Schema.Struct({
  account: Schema.Struct({ id: Schema.String, name: Schema.String, mode: AccountMode }),
  csrf_token: Schema.String,
  /** The absolute end of the session. */
  expires_at: Schema.String,
  /** Idle this long (seconds) and the session ends sooner. */
  idle_timeout_seconds: Schema.Int
}).annotations({ identifier: "PortalSession" })
export type SessionView = typeof SessionView.Type

export class SessionGroup extends HttpApiGroup.make("session")
  .add(HttpApiEndpoint.get("get", "/api/session").annotate(OpenApi.Summary, "Get the session").addSuccess(SessionView))
  .add(
    HttpApiEndpoint.post("logout", "/api/session/logout")
      .annotate(OpenApi.Summary, "Sign out")
      .addSuccess(HttpApiSchema.NoContent)
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The signed-in session.")
{}

// ---------------------------------------------------------------------------
// Integration keys
// ---------------------------------------------------------------------------

/** A key in the page: never the key, only its last four characters. */
export const KeyView = Schema.Struct({
  id: Schema.String,
  label: Schema.NullOr(Schema.String),
  last_four: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  last_used_at: Schema.NullOr(Schema.String),
  disabled_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "PortalKey" })
export type KeyView = typeof KeyView.Type

export const CreateKeyRequest = Schema.Struct({
  label: Schema.Trim.pipe(Schema.maxLength(100, { message: () => "The label must be at most 100 characters." }))
}).annotations({ identifier: "PortalCreateKey" })

/** The created key: the only answer that ever carries it. */
export const CreatedKey = Schema.Struct({ ...KeyView.fields, key: Schema.String }).annotations({ identifier: "PortalCreatedKey" })
export type CreatedKey = typeof CreatedKey.Type

const keyPath = Schema.Struct({ keyId: Schema.String })

export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.get("list", "/api/keys")
      .annotate(OpenApi.Summary, "List integration keys")
      .addSuccess(Schema.Struct({ keys: Schema.Array(KeyView) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api/keys")
      .annotate(OpenApi.Summary, "Create an integration key")
      .setPayload(CreateKeyRequest).addSuccess(CreatedKey, { status: 201 }).addError(BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.post("disable", "/api/keys/:keyId/disable")
      .annotate(OpenApi.Summary, "Disable an integration key")
      .setPath(keyPath).addSuccess(HttpApiSchema.NoContent).addError(NotFound.wire)
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The account's integration keys.")
{}

// ---------------------------------------------------------------------------
// Hooks (subscriptions) and the signing secret
// ---------------------------------------------------------------------------

/**
 * A hook (a subscription of the account) and where it stands: `active`,
 * `failing` (every attempt has failed since `failing_since`), `disabled`
 * (when and why: after days of failures, by the operator or in this page),
 * or `removed` (when and why: `gone` when the receiver answered 410 Gone,
 * `unsubscribed` when it was removed through the Event API, the operator
 * or this page).
 */
export const HookView = Schema.Struct({
  id: Schema.String,
  target_url: Schema.String,
  event: Schema.String,
  created_at: Schema.String,
  /** The key that subscribed it; null when it was added by hand in this page. */
  created_by_key: Schema.NullOr(Schema.Struct({ id: Schema.String, label: Schema.NullOr(Schema.String), last_four: Schema.NullOr(Schema.String) })),
  state: SubscriptionState,
  failing_since: Schema.NullOr(Schema.String),
  disabled_at: Schema.NullOr(Schema.String),
  /** Why, in one sentence (an automatic disable names the last failure). */
  disabled_reason: Schema.NullOr(Schema.String),
  removed_at: Schema.NullOr(Schema.String),
  removed_reason: Schema.NullOr(Schema.Literal("gone", "unsubscribed"))
}).annotations({ identifier: "PortalHook" })
export type HookView = typeof HookView.Type

/**
 * GET /api/hooks: the hooks that receive events (disabled ones included), and the latest removed
 * ones, newest first; `count` of `limit`: the account's hooks (disabled ones included) and the most it may have.
 */
export const HookList = Schema.Struct({
  hooks: Schema.Array(HookView),
  removed: Schema.Array(HookView),
  count: Schema.Int,
  limit: Schema.Int
}).annotations({ identifier: "PortalHookList" })
export type HookList = typeof HookList.Type

export const CreateHookRequest = Schema.Struct({
  target_url: Schema.Trim.pipe(Schema.minLength(1, { message: () => "The target URL is required." })),
  event: Schema.Literal("lead", "booking", "all")
}).annotations({ identifier: "PortalCreateHook" })

/** A test event was queued for the hook: watch its delivery. */
export const TestSent = Schema.Struct({ delivery_id: Schema.String }).annotations({ identifier: "PortalTestSent" })

/** Disable, enable and recover answer as on the internal API (one description of each payload). */
export { RecoverRequest, RecoveryView, SubscriptionDisabled, ToggleAnswer }

const hookPath = Schema.Struct({ id: Schema.String })

export class HooksGroup extends HttpApiGroup.make("hooks")
  .add(HttpApiEndpoint.get("list", "/api/hooks").annotate(OpenApi.Summary, "List hooks").addSuccess(HookList))
  .add(
    HttpApiEndpoint.post("create", "/api/hooks")
      .annotate(OpenApi.Summary, "Add a hook")
      .setPayload(CreateHookRequest).addSuccess(HookView, { status: 201 }).addError(BadRequest.wire)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/hooks/:id")
      .annotate(OpenApi.Summary, "Remove a hook")
      .setPath(hookPath).addSuccess(HttpApiSchema.NoContent).addError(NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("test", "/api/hooks/:id/test")
      .annotate(OpenApi.Summary, "Send a test event to a hook")
      .setPath(hookPath).addSuccess(TestSent, { status: 202 }).addError(NotFound.wire)
  )
  .add(
    HttpApiEndpoint.post("disable", "/api/hooks/:id/disable")
      .annotate(OpenApi.Summary, "Disable a hook")
      .setPath(hookPath)
      .addSuccess(ToggleAnswer)
      .addError(NotFound.wire)
      .annotate(OpenApi.Description, "Stops deliveries to the hook (its waiting deliveries end as `disabled`); it is kept, to enable again.")
  )
  .add(
    HttpApiEndpoint.post("enable", "/api/hooks/:id/enable")
      .annotate(OpenApi.Summary, "Enable a hook")
      .setPath(hookPath)
      .addSuccess(ToggleAnswer)
      .addError(NotFound.wire)
      .annotate(OpenApi.Description, "Delivers new events to a disabled hook again; its failure clock starts afresh.")
  )
  .add(
    HttpApiEndpoint.post("recover", "/api/hooks/:id/recover")
      .annotate(OpenApi.Summary, "Send a hook's failed deliveries again")
      .setPath(hookPath)
      .setPayload(RecoverRequest)
      .addSuccess(RecoveryView, { status: 202 })
      .addError(BadRequest.wire)
      .addError(NotFound.wire)
      .addError(SubscriptionDisabled.wire)
      .annotate(
        OpenApi.Description,
        "Sends again every failed or ended delivery of the hook created from `since` to `until` (default now), in the background; " +
          "follow it with GET /api/recoveries/{id}. 400 for a window in the future or reversed, 409 while the hook is disabled."
      )
  )
  .add(
    HttpApiEndpoint.get("recovery", "/api/recoveries/:id")
      .annotate(OpenApi.Summary, "Get a recovery's progress")
      .setPath(hookPath).addSuccess(RecoveryView).addError(NotFound.wire)
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The account's hooks (Event API subscriptions).")
{}

/** The signing secret's state (never the secret). */
export const SigningSecretView = Schema.Struct({
  created_at: Schema.String,
  rotated_at: Schema.NullOr(Schema.String),
  /** While set, deliveries carry a second signature made with the previous secret. */
  previous_until: Schema.NullOr(Schema.String)
}).annotations({ identifier: "PortalSigningSecret" })
export type SigningSecretView = typeof SigningSecretView.Type

/** The secret, revealed on request (and the previous one during an overlap). */
export const RevealedSecret = Schema.Struct({
  secret: Schema.String,
  previous_secret: Schema.NullOr(Schema.String)
}).annotations({ identifier: "PortalRevealedSecret" })

export const RotateRequest = Schema.Struct({
  /** How long the previous secret keeps signing too: 0 to 168 hours. */
  overlap_hours: Schema.Number.pipe(Schema.between(0, 168, { message: () => "The overlap must be 0 to 168 hours." }))
}).annotations({ identifier: "PortalRotate" })

export class SigningSecretGroup extends HttpApiGroup.make("signingSecret")
  .add(
    HttpApiEndpoint.get("get", "/api/signing-secret")
      .annotate(OpenApi.Summary, "Get the signing secret's state")
      .addSuccess(SigningSecretView)
  )
  .add(
    HttpApiEndpoint.post("reveal", "/api/signing-secret/reveal")
      .annotate(OpenApi.Summary, "Reveal the signing secret")
      .addSuccess(RevealedSecret)
  )
  .add(
    HttpApiEndpoint.post("rotate", "/api/signing-secret/rotate")
      .annotate(OpenApi.Summary, "Rotate the signing secret")
      .setPayload(RotateRequest).addSuccess(SigningSecretView).addError(BadRequest.wire)
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The account's webhook signing secret.")
{}

// ---------------------------------------------------------------------------
// CRM bridge connections
// ---------------------------------------------------------------------------

/** The connection form: transport, URL, one credential. */
export const ConnectionForm = Schema.Struct({
  transport: Schema.Literal("rest", "mcp"),
  url: Schema.String,
  /** The same credential the internal API's connection request takes. */
  auth: AuthRequest
}).annotations({ identifier: "PortalConnectionForm" })
export type ConnectionForm = typeof ConnectionForm.Type

/** A stored connection: everything but the secret, which is only "set on DATE". */
export const ConnectionView = Schema.Struct({
  tenant_id: Schema.String,
  transport: Schema.String,
  url: Schema.String,
  auth: Schema.Struct({
    type: Schema.Literal("api_key", "oauth"),
    token_url: Schema.NullOr(Schema.String),
    client_id: Schema.NullOr(Schema.String),
    scope: Schema.NullOr(Schema.String)
  }),
  secret_set_at: Schema.String,
  capabilities: CapabilitiesResponse,
  checked_at: Schema.String
}).annotations({ identifier: "PortalConnection" })
export type ConnectionView = typeof ConnectionView.Type

export const ConnectionsView = Schema.Struct({
  /** False for demo and sandbox accounts; `reason` says why in plain words. */
  allowed: Schema.Boolean,
  reason: Schema.NullOr(Schema.String),
  connections: Schema.Array(ConnectionView)
}).annotations({ identifier: "PortalConnections" })
export type ConnectionsView = typeof ConnectionsView.Type

/** The conformance check's report on a stored connection (the contract's, as the internal API and the CLI answer it). */
export { Report as ConformanceReport } from "./Conformance.js"

/** What the bridge advertised to a passing check. */
export const CheckPassed = Schema.Struct({ capabilities: CapabilitiesResponse }).annotations({ identifier: "PortalCheckPassed" })

const tenantPath = Schema.Struct({ tenantId: Schema.String })

export class ConnectionsGroup extends HttpApiGroup.make("connections")
  .add(
    HttpApiEndpoint.get("list", "/api/connections")
      .annotate(OpenApi.Summary, "List bridge connections")
      .addSuccess(ConnectionsView)
  )
  .add(
    HttpApiEndpoint.post("test", "/api/connections/:tenantId/test")
      .annotate(OpenApi.Summary, "Test a bridge connection before saving it")
      .setPath(tenantPath)
      .setPayload(ConnectionForm)
      .addSuccess(CheckPassed)
      .addError(InvalidConnection.wire)
      .addError(ConnectionNotAllowed.wire)
      .addError(CheckFailed.wire)
  )
  .add(
    HttpApiEndpoint.put("save", "/api/connections/:tenantId")
      .annotate(OpenApi.Summary, "Save a bridge connection")
      .setPath(tenantPath)
      .setPayload(ConnectionForm)
      .addSuccess(ConnectionView)
      .addError(InvalidConnection.wire)
      .addError(ConnectionNotAllowed.wire)
      .addError(CheckFailed.wire)
  )
  .add(
    // A change in HTTP terms (it reaches the bridge), so CSRF-protected; read-only on the CRM: it writes nothing there.
    HttpApiEndpoint.post("check", "/api/connections/:tenantId/check")
      .annotate(OpenApi.Summary, "Run the bridge conformance check")
      .setPath(tenantPath)
      .addSuccess(ConformanceReport)
      .addError(NotFound.wire)
      .addError(InvalidConnection.wire)
      .addError(ConnectionNotAllowed.wire)
      .annotate(
        OpenApi.Description,
        "Runs the read-only bridge conformance check on the stored connection of the tenant and answers the report " +
          "(a failing bridge is a report with `passed: false`, not an error). 404 when the account has no connection for the tenant."
      )
  )
  .middleware(PortalAuth)
  .annotate(OpenApi.Description, "The account's CRM bridge connections.")
{}

/** The Integrations area's API. */
export class PortalApi extends HttpApi.make("portal-api")
  .add(SessionGroup)
  .add(KeysGroup)
  .add(HooksGroup)
  .add(SigningSecretGroup)
  .add(ConnectionsGroup)
  .add(ActivityGroup)
  .add(DestinationsGroup)
  .annotate(OpenApi.Title, "crm-relay Integrations area API")
  .annotate(
    OpenApi.Description,
    "The API of the account's own web page. A session cookie (from a single-use link the operator mints) authenticates every call; " +
      "every change carries the session's CSRF token in x-csrf-token."
  )
  .annotate(OpenApi.License, LICENSE)
  .annotate(OpenApi.Servers, baseUrlServer("http://127.0.0.1:8082", "The Integrations area's address: PORTAL_PUBLIC_URL, or http://PORTAL_HOST:PORTAL_PORT."))
{}
