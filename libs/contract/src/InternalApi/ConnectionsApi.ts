/**
 * Bridge connections, webhook signing secrets and the master key on the
 * internal API. Statuses of the connection form:
 *
 * | status | when |
 * |---|---|
 * | 200 `{capabilities}` | the capabilities check passed; the connection and capabilities are stored |
 * | 400 `{error, field?}` | the body or a setting is invalid; `field` names the connection-form field (`transport`, `url`, `auth.key`, `auth.token_url`, `auth.client_id`, `auth.client_secret`, `auth.scope`, `tenant`) |
 * | 404 | no such account (`test`: or no connection for the tenant) |
 * | 409 | demo and sandbox accounts cannot connect a bridge to a real CRM |
 * | 422 | the check reached the bridge (or its token endpoint) and failed: credential refused, egress refused the address, redirect, other 4xx, or an answer that is not a valid capabilities receipt |
 * | 502 | the bridge (or its token endpoint) could not be reached: network failure, deadline, 429 or 5xx; try again later |
 *
 * `POST .../check` runs the bridge conformance check on the stored connection
 * and answers 200 with the report whatever the verdict (`passed`,
 * `earned_level`); 404 when there is no account or connection, 400 when the
 * stored connection cannot be used. `{"writes": true}` also runs the write
 * level, which creates labelled test records: only on a test tenant.
 *
 * A failed check stores nothing. No answer ever carries a bridge credential;
 * `GET .../signing-secret` is the one place the account's own webhook
 * signing secret is shown (to configure receivers).
 *
 * The groups get the admin-token middleware where InternalApi adds them.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import * as Conformance from "../Conformance.js"
import * as Events from "../Events.js"
import * as Operations from "../Operations.js"
import { Schema } from "effect"

/** The connection form's credential: an API key, or OAuth 2.0 client credentials. */
export const AuthRequest = Schema.Union(
  Schema.Struct({ type: Schema.Literal("api_key"), key: Schema.Redacted(Schema.String) }),
  Schema.Struct({
    type: Schema.Literal("oauth"),
    token_url: Schema.String,
    client_id: Schema.String,
    client_secret: Schema.Redacted(Schema.String),
    scope: Schema.optionalWith(Schema.String, { exact: true })
  })
).annotations({ identifier: "ConnectionAuth" })

/** PUT /v1/accounts/{id}/connections/{tenantId} body. */
export const ConnectionRequest = Schema.Struct({
  /** `rest` or `mcp`. */
  transport: Schema.String,
  /** `{bridge_base_url}` for REST, the full `{mcp_url}` for MCP. */
  url: Schema.String,
  auth: AuthRequest
}).annotations({ identifier: "ConnectionRequest" })
export type ConnectionRequest = typeof ConnectionRequest.Type

/** The answer of a passed capabilities check. */
export const CapabilitiesAnswer = Schema.Struct({ capabilities: Operations.CapabilitiesResponse }).annotations({
  identifier: "CapabilitiesAnswer"
})

/** A stored connection as the operator sees it: everything but the secret. */
export const ConnectionView = Schema.Struct({
  account_id: Schema.String,
  tenant_id: Schema.String,
  transport: Schema.String,
  url: Schema.String,
  version: Schema.Int,
  auth: Schema.Union(
    Schema.Struct({ type: Schema.Literal("api_key") }),
    Schema.Struct({
      type: Schema.Literal("oauth"),
      token_url: Schema.String,
      client_id: Schema.String,
      scope: Schema.optionalWith(Schema.String, { exact: true })
    })
  ),
  capabilities: Operations.CapabilitiesResponse,
  checked_at: Schema.String
}).annotations({ identifier: "ConnectionView" })
export type ConnectionView = typeof ConnectionView.Type

/**
 * 400 of the connection form: one sentence and, for a setting, its form field;
 * `{error, field?}` on the wire (request-decoding errors arrive in this shape too).
 */
export class InvalidSettings extends Schema.TaggedError<InvalidSettings>()("InvalidSettings", {
  error: Schema.String,
  field: Schema.optionalWith(Schema.String, { exact: true })
}) {
  static readonly wire = Events.errorObject(
    this,
    400,
    "The connection form is invalid; `field` names the form field when a setting is at fault.",
    "ConnectionInvalidError"
  )
}

/** 409: demo and sandbox accounts cannot connect a bridge. */
export class ConnectionNotAllowed extends Schema.TaggedError<ConnectionNotAllowed>()("ConnectionNotAllowed", {
  error: Schema.String
}) {
  static readonly wire = Events.errorObject(
    this,
    409,
    "Demo and sandbox accounts cannot connect a bridge to a real CRM.",
    "ConnectionNotAllowedError"
  )
}

/** 422: the check reached the bridge and did not pass. */
export class CheckRefused extends Schema.TaggedError<CheckRefused>()("CheckRefused", { error: Schema.String }) {
  static readonly wire = Events.errorObject(
    this,
    422,
    "The capabilities check reached the bridge (or its token endpoint) and did not pass; nothing was stored.",
    "CheckRefusedError"
  )
}

const connectionPath = Schema.Struct({ id: Schema.String, tenantId: Schema.String })

/** The connection form: set (runs the capabilities check only), test, read. */
export class ConnectionsGroup extends HttpApiGroup.make("connections")
  .add(
    HttpApiEndpoint.put("set", "/v1/accounts/:id/connections/:tenantId")
      .annotate(OpenApi.Summary, "Set a tenant's bridge connection")
      .setPath(connectionPath)
      .setPayload(ConnectionRequest)
      .addSuccess(CapabilitiesAnswer)
      .addError(InvalidSettings.wire)
      .addError(Events.NotFound.wire)
      .addError(ConnectionNotAllowed.wire)
      .addError(CheckRefused.wire)
      .addError(Events.Unavailable.wire)
  )
  .add(
    HttpApiEndpoint.post("test", "/v1/accounts/:id/connections/:tenantId/test")
      .annotate(OpenApi.Summary, "Test a tenant's bridge connection")
      .setPath(connectionPath)
      .addSuccess(CapabilitiesAnswer)
      .addError(InvalidSettings.wire)
      .addError(Events.NotFound.wire)
      .addError(ConnectionNotAllowed.wire)
      .addError(CheckRefused.wire)
      .addError(Events.Unavailable.wire)
  )
  .add(
    HttpApiEndpoint.post("check", "/v1/accounts/:id/connections/:tenantId/check")
      .annotate(OpenApi.Summary, "Run the bridge conformance check")
      .setPath(connectionPath)
      .setPayload(Conformance.CheckRequest)
      .addSuccess(Conformance.Report)
      .addError(InvalidSettings.wire)
      .addError(Events.NotFound.wire)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/accounts/:id/connections/:tenantId")
      .annotate(OpenApi.Summary, "Get a tenant's bridge connection")
      .setPath(connectionPath)
      .addSuccess(ConnectionView)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "An account's CRM bridge connection per tenant.")
{}

/** GET /v1/accounts/{id}/signing-secret answer. */
export const SigningSecretAnswer = Schema.Struct({ secret: Schema.String }).annotations({ identifier: "SigningSecret" })

/** The account's Standard Webhooks signing secret (created on first use). */
export class SigningSecretGroup extends HttpApiGroup.make("signingSecret")
  .add(
    HttpApiEndpoint.get("get", "/v1/accounts/:id/signing-secret")
      .annotate(OpenApi.Summary, "Get an account's webhook signing secret")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(SigningSecretAnswer)
      .addError(Events.NotFound.wire)
  )
  .annotate(OpenApi.Description, "An account's webhook signing secret.")
{}

/** POST /v1/master-key/rotate answer (ids only, never key material). */
export const RotationAnswer = Schema.Struct({
  /** The new active data key. */
  key_id: Schema.String,
  /** The master key (fingerprint) of the process that rotated. */
  master_key_id: Schema.String,
  resealed: Schema.Int,
  /** Secrets that did not authenticate (altered or moved); they keep their old key. */
  undecryptable: Schema.Array(Schema.String),
  deleted_keys: Schema.Array(Schema.String)
}).annotations({ identifier: "RotationAnswer" })
export type RotationAnswer = typeof RotationAnswer.Type

/** 409: the stored data keys do not open under this server's master keys; nothing was changed. */
export class RotationRefused extends Schema.TaggedError<RotationRefused>()("RotationRefused", { error: Schema.String }) {
  static readonly wire = Events.errorObject(
    this,
    409,
    "The stored data keys do not open under this server's master keys; nothing was changed.",
    "RotationRefusedError"
  )
}

/**
 * Query of POST /v1/master-key/rotate: `master_key_id`, the id (fingerprint)
 * of the master key the caller wants the new data key wrapped under; the
 * server refuses (409) when its own MASTER_KEY is another one.
 */
export const RotationParams = Schema.Struct({
  master_key_id: Schema.optionalWith(Schema.String, { exact: true })
})

/** Master key rotation: a new data key, every secret re-sealed under it, while the service runs. */
export class MasterKeyGroup extends HttpApiGroup.make("masterKey")
  .add(
    HttpApiEndpoint.post("rotate", "/v1/master-key/rotate")
      .annotate(OpenApi.Summary, "Rotate the data key and re-seal every secret")
      .setUrlParams(RotationParams)
      .addSuccess(RotationAnswer)
      .addError(RotationRefused.wire)
  )
  .annotate(OpenApi.Description, "The keys that encrypt secrets at rest.")
{}
