/**
 * Event destinations as the internal API, the CLI and the Integrations area
 * describe them: one configuration Schema per kind (what the broker would
 * reject is refused here, before anything connects), and the shapes of the
 * destination routes. Every kind's configuration names its target's `url`:
 * its origin is the delivery queue's fair-share key (one broker host, one
 * share). Credentials go in beside the configuration, are sealed at rest and
 * are never shown again.
 */
import { Schema } from "effect"
import { NatsConfig } from "./Destinations/Nats.js"
import { RabbitmqConfig } from "./Destinations/Rabbitmq.js"
import { Json } from "./Values.js"

const urlWith = (schemes: ReadonlyArray<string>, what: string) =>
  Schema.String.pipe(
    Schema.filter((text) => {
      const url = URL.parse(text)
      return url !== null && schemes.includes(url.protocol) && url.hostname !== "" && url.username === "" &&
          url.password === "" && url.hash === ""
        ? undefined
        : `${what} must be a ${schemes.map((s) => `${s}//`).join(" or ")} URL with a host, without credentials or a fragment.`
    })
  )

/** An HTTPS webhook: REST hooks stay HTTPS. */
export const WebhookConfig = Schema.Struct({
  url: urlWith(["https:"], "The webhook URL")
}).annotations({ identifier: "WebhookDestinationConfig" })
export type WebhookConfig = typeof WebhookConfig.Type

export { AmqpUrl, ExchangeName, RabbitmqConfig, RabbitmqCredentials, RoutingKey } from "./Destinations/Rabbitmq.js"
export { NatsConfig, NatsCredentials, NatsUrl, StreamName, Subject } from "./Destinations/Nats.js"

/**
 * A RabbitMQ exchange (AMQP 0-9-1) as sent: messages are persistent, published with confirms and
 * `mandatory` (an unroutable message is a failed attempt). `amqps://` by default; `amqp://` only
 * toward an address `EGRESS_ALLOW_PRIVATE` allows. Credentials: `{username, password}`.
 */
export const RabbitmqConfigJson = Schema.encodedBoundSchema(RabbitmqConfig).annotations({
  identifier: "RabbitmqDestinationConfig",
  description: "url (amqps://host[:port][/vhost]), exchange, routing_key. Credentials: {username, password}."
})

/**
 * A NATS JetStream subject as sent: the publish ack is the receipt; the `webhook-id` is the
 * `Nats-Msg-Id`, so the stream drops a redelivery. `tls://` by default; `nats://` only toward an
 * address `EGRESS_ALLOW_PRIVATE` allows. Credentials: `{user, password}` or `{token}`.
 */
export const NatsConfigJson = Schema.encodedBoundSchema(NatsConfig).annotations({
  identifier: "NatsDestinationConfig",
  description: "url (tls://host[:port]), subject, optional stream that must capture it. Credentials: {user, password} or {token}."
})

/** A kind's configuration as sent and shown: a JSON object (its kind's Schema above checks it). */
export const DestinationConfig = Schema.Record({ key: Schema.String, value: Json }).annotations({
  identifier: "DestinationConfig",
  description: "The kind's configuration: webhook {url}; rabbitmq {url, exchange, routing_key}; nats {url, subject, stream?}."
})

/**
 * What a create request's `config` may be: one of the kinds' Schemas (so the OpenAPI document shows
 * them), or any object for a kind this document does not list; the kind's own Schema decides.
 */
export const CreateDestinationConfig = Schema.Union(WebhookConfig, RabbitmqConfigJson, NatsConfigJson, DestinationConfig)

/** Which events a destination receives. */
export const DestinationEvent = Schema.Literal("lead", "booking", "all").annotations({ identifier: "DestinationEvent" })

/** POST /v1/accounts/{id}/destinations body. `config` is checked by the kind's Schema above. */
export const CreateDestinationRequest = Schema.Struct({
  kind: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_]{0,31}$/, { message: () => "The kind must be a name such as webhook, rabbitmq or nats." })),
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  event: Schema.optionalWith(DestinationEvent, { exact: true, default: () => "all" as const }),
  config: CreateDestinationConfig,
  /** The kind's credentials (RabbitMQ: `username`, `password`; NATS: `user`/`password` or `token`); sealed, never shown. */
  credentials: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { exact: true })
}).annotations({ identifier: "CreateDestinationRequest" })
export type CreateDestinationRequest = typeof CreateDestinationRequest.Type

/** A destination as its owner sees it (never its credentials; times as ISO strings). */
export const DestinationView = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  event: Schema.String,
  config: DestinationConfig,
  has_credentials: Schema.Boolean,
  /** Its subscription: its deliveries, its recover and its test events go through it. */
  subscription_id: Schema.String,
  state: Schema.Literal("active", "failing", "disabled"),
  created_at: Schema.String,
  failing_since: Schema.NullOr(Schema.String),
  disabled_at: Schema.NullOr(Schema.String),
  disabled_reason: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Destination" })
export type DestinationView = typeof DestinationView.Type
