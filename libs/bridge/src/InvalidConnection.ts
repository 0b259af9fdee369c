/**
 * A connection setting refused when the client is configured, before any
 * request is sent (a malformed API key, a bridge URL with a query string, an
 * unknown transport kind).
 */
import { Schema } from "effect"

/**
 * A connection setting that cannot be used: `field` is its connection-form
 * name (`transport`, `url`, `auth.key`, `auth.token_url`, `auth.client_id`,
 * `auth.client_secret`, `auth.scope`, `tenant`), `message` says why in one sentence.
 */
export class InvalidConnection extends Schema.TaggedError<InvalidConnection>()("InvalidConnection", {
  field: Schema.String,
  message: Schema.String
}) {}
