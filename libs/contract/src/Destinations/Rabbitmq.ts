/**
 * A RabbitMQ destination's settings (AMQP 0-9-1): where to connect, the
 * exchange and the routing key each event is published with. Names the
 * broker would reject are refused here, before anything is stored.
 */
import { Schema } from "effect"

// TextEncoder, not Buffer: the Integrations area's page encodes these Schemas in the browser.
const encoder = new TextEncoder()
const utf8Length = (text: string) => encoder.encode(text).length

/** An AMQP URL: `amqps://host[:port][/vhost]`, or `amqp://` for a development broker on an allowed private address. */
export const AmqpUrl = Schema.String.pipe(
  Schema.filter((text) => {
    const url = URL.parse(text)
    if (url === null || (url.protocol !== "amqps:" && url.protocol !== "amqp:") || url.hostname === "") {
      return "must be an amqps:// URL (amqp:// only for a private address EGRESS_ALLOW_PRIVATE allows)"
    }
    if (url.username !== "" || url.password !== "") return "must not carry credentials; they are given separately and sealed"
    if (url.search !== "" || url.hash !== "") return "must not carry a query string or fragment"
    return true
  }),
  Schema.brand("AmqpUrl")
).annotations({ identifier: "AmqpUrl", description: "amqps://host[:port][/vhost]; amqp:// only on an allowed private address." })
export type AmqpUrl = typeof AmqpUrl.Type

/** An exchange name RabbitMQ accepts: 1 to 255 letters, digits, `-`, `_`, `.` or `:`. */
export const ExchangeName = Schema.String.pipe(
  Schema.filter((name) =>
    /^[A-Za-z0-9_.:-]{1,255}$/.test(name) ||
    "must be 1 to 255 characters, each a letter, a digit, '-', '_', '.' or ':'"
  ),
  Schema.brand("ExchangeName")
).annotations({ identifier: "ExchangeName", description: "1 to 255 letters, digits, '-', '_', '.' or ':'." })
export type ExchangeName = typeof ExchangeName.Type

/** A routing key: at most 255 bytes of UTF-8 (an AMQP short string); empty is allowed. */
export const RoutingKey = Schema.String.pipe(
  Schema.filter((key) => utf8Length(key) <= 255 || "must be at most 255 bytes of UTF-8"),
  Schema.brand("RoutingKey")
).annotations({ identifier: "RoutingKey", description: "At most 255 bytes of UTF-8; may be empty." })
export type RoutingKey = typeof RoutingKey.Type

/** Where and how a RabbitMQ destination publishes (stored and sent as `{url, exchange, routing_key}`). */
export class RabbitmqConfig extends Schema.Class<RabbitmqConfig>("RabbitmqConfig")({
  url: AmqpUrl,
  exchange: ExchangeName,
  // The API's JSON is snake_case, as every other field of the internal API.
  routingKey: Schema.propertySignature(RoutingKey).pipe(Schema.fromKey("routing_key"))
}) {}

/** The user RabbitMQ authenticates (PLAIN); sealed in the Vault, never shown again. */
export class RabbitmqCredentials extends Schema.Class<RabbitmqCredentials>("RabbitmqCredentials")({
  username: Schema.NonEmptyString,
  password: Schema.Redacted(Schema.String)
}) {}
