/**
 * A NATS JetStream subject as a destination kind: each delivery is
 * published on the subject with the `webhook-id` as `Nats-Msg-Id` (the
 * stream drops a redelivery inside its duplicate window) and the Standard
 * Webhooks headers as message headers (JetStreamPublisher). The publish ack
 * is the receipt; a subject no stream captures is Permanent.
 *
 * One connection per destination, through BrokerEgress (pinned public
 * address, TLS unless EGRESS_ALLOW_PRIVATE allows the server), kept and
 * reused, closed when unused for `idle` and with the Layer. The stored
 * configuration is `{url, subject, stream?}`; the credentials,
 * `{user, password}` or `{token}`, are unsealed from the Vault by Destinations.
 */
import type { BrokerEgress } from "@crm-relay/bridge"
import { NatsConfig, type NatsCredentials } from "@crm-relay/contract/Destinations/Nats"
import { Either, Layer, Option, Redacted, Schema } from "effect"
import { Destination } from "./Destination.js"
import { DestinationKinds } from "./DestinationKinds.js"
import * as BrokerKind from "./internal/brokers/BrokerKind.js"
import * as JetStreamPublisher from "./internal/brokers/JetStreamPublisher.js"

/** The kind's name. */
export const KIND = "nats"

/** Settings of the kind (tests shorten or lengthen them): `idle`, `timeoutMs`, `extraCa`. */
export type Options = BrokerKind.Options

/** The credentials as sent and sealed: a user and password, or a token. */
const Credentials = Schema.Union(
  Schema.Struct({ user: Schema.NonEmptyString, password: Schema.Redacted(Schema.String) }),
  Schema.Struct({ token: Schema.Redacted(Schema.NonEmptyString) })
)
const decodeCredentials = Schema.decodeEither(Schema.parseJson(Credentials))
const credentialsOf = (credentials: Option.Option<Redacted.Redacted<string>>) =>
  Option.match(credentials, {
    onNone: () => Either.left(BrokerKind.badCredentials(KIND, "given: user and password, or token")),
    onSome: (text) =>
      Either.match(decodeCredentials(Redacted.value(text)), {
        onLeft: () => Either.left(BrokerKind.badCredentials(KIND, "a user and a password, or a token")),
        onRight: (c): Either.Either<NatsCredentials> =>
          Either.right("token" in c ? { _tag: "Token", token: c.token } : { _tag: "UserPassword", user: c.user, password: c.password })
      })
  })

/** The NATS kind over the context's BrokerEgress; its connections close with the scope. */
export const makeService = (options: Options = {}) =>
  BrokerKind.destination({
    kind: KIND,
    config: NatsConfig,
    credentialsOf,
    open: JetStreamPublisher.make,
    check: JetStreamPublisher.check
  }, options)

/** The NATS kind as a `Destination` Layer, with `options`. */
export const layerWith = (options: Options = {}): Layer.Layer<Destination, never, BrokerEgress> =>
  Layer.scoped(Destination, makeService(options))

/** The NATS kind as a `Destination` Layer. */
export const layer: Layer.Layer<Destination, never, BrokerEgress> = layerWith()

/** The NATS kind, registered into the app's `DestinationKinds`. */
export const registered: Layer.Layer<never, never, BrokerEgress | DestinationKinds> = DestinationKinds.register(layer)
