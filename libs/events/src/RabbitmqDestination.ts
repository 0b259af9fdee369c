/**
 * A RabbitMQ exchange (AMQP 0-9-1) as a destination kind: each delivery is
 * published persistent, `mandatory`, on a confirm channel, with the
 * `webhook-id` as its message id and the Standard Webhooks headers as
 * message headers (AmqpPublisher). The confirm is the receipt; an
 * unroutable message is Permanent with the broker's reason.
 *
 * One connection per destination, through BrokerEgress (pinned public
 * address, TLS unless EGRESS_ALLOW_PRIVATE allows the broker), kept and
 * reused, closed when unused for `idle` and with the Layer. The stored
 * configuration is `{url, exchange, routing_key}`; the credentials,
 * `{username, password}`, are unsealed from the Vault by Destinations.
 */
import type { BrokerEgress } from "@crm-relay/bridge"
import { RabbitmqConfig, RabbitmqCredentials } from "@crm-relay/contract/Destinations/Rabbitmq"
import { Either, Layer, Option, Redacted, Schema } from "effect"
import { Destination } from "./Destination.js"
import { DestinationKinds } from "./DestinationKinds.js"
import * as AmqpPublisher from "./internal/brokers/AmqpPublisher.js"
import * as BrokerKind from "./internal/brokers/BrokerKind.js"

/** The kind's name. */
export const KIND = "rabbitmq"

/** Settings of the kind (tests shorten or lengthen them): `idle`, `timeoutMs`, `extraCa`. */
export type Options = BrokerKind.Options

const decodeCredentials = Schema.decodeEither(Schema.parseJson(RabbitmqCredentials))
const credentialsOf = (credentials: Option.Option<Redacted.Redacted<string>>) =>
  Option.match(credentials, {
    onNone: () => Either.left(BrokerKind.badCredentials(KIND, "given: username and password")),
    onSome: (text) =>
      Either.mapLeft(decodeCredentials(Redacted.value(text)), () => BrokerKind.badCredentials(KIND, "a username and a password"))
  })

/** The RabbitMQ kind over the context's BrokerEgress; its connections close with the scope. */
export const makeService = (options: Options = {}) =>
  BrokerKind.destination({
    kind: KIND,
    config: RabbitmqConfig,
    credentialsOf,
    open: AmqpPublisher.make,
    check: AmqpPublisher.check
  }, options)

/** The RabbitMQ kind as a `Destination` Layer, with `options`. */
export const layerWith = (options: Options = {}): Layer.Layer<Destination, never, BrokerEgress> =>
  Layer.scoped(Destination, makeService(options))

/** The RabbitMQ kind as a `Destination` Layer. */
export const layer: Layer.Layer<Destination, never, BrokerEgress> = layerWith()

/** The RabbitMQ kind, registered into the app's `DestinationKinds`. */
export const registered: Layer.Layer<never, never, BrokerEgress | DestinationKinds> = DestinationKinds.register(layer)
