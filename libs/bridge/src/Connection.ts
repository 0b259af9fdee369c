/**
 * One tenant's bridge connection as the connection form records it: the
 * transport kind and URL, and one credential (API key or OAuth client
 * credentials). `version` changes whenever the stored configuration does.
 */
import { Schema } from "effect"

/** `Authorization: Bearer <key>`; the key is visible ASCII without spaces. */
export const ApiKeyAuth = Schema.Struct({
  type: Schema.Literal("api_key"),
  key: Schema.Redacted(Schema.String)
}).annotations({ identifier: "ApiKeyAuth" })
export type ApiKeyAuth = typeof ApiKeyAuth.Type

/** OAuth 2.0 client credentials toward `tokenUrl`; `scope` only when configured. */
export const OAuthAuth = Schema.Struct({
  type: Schema.Literal("oauth"),
  tokenUrl: Schema.String,
  clientId: Schema.String,
  clientSecret: Schema.Redacted(Schema.String),
  scope: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "OAuthAuth" })
export type OAuthAuth = typeof OAuthAuth.Type

/** The credential of a connection: one type per connection. */
export const ConnectionAuth = Schema.Union(ApiKeyAuth, OAuthAuth)
export type ConnectionAuth = typeof ConnectionAuth.Type

/** A tenant's bridge connection. */
export const Connection = Schema.Struct({
  accountId: Schema.String.pipe(Schema.minLength(1)),
  tenantId: Schema.String.pipe(Schema.minLength(1)),
  /** Bumped on every configuration change; part of the client and token cache identity. */
  version: Schema.Int,
  transport: Schema.Struct({
    /** A kind in the TransportRegistry: `rest` or `mcp`. */
    kind: Schema.String,
    /** `{bridge_base_url}` for REST, the full `{mcp_url}` for MCP. */
    url: Schema.String
  }),
  auth: ConnectionAuth
}).annotations({ identifier: "Connection" })
export type Connection = typeof Connection.Type
