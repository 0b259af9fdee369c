/**
 * The bridge side of a test server: the real safe egress, trusting the CAs
 * of the loopback servers, with their names pinned to 127.0.0.1 and only
 * 127.0.0.1 allowed (as EGRESS_ALLOW_PRIVATE would) — so `private.localhost`
 * (10.20.30.40) is refused like any private address. Built on the live
 * clock, so a test's TestClock jumps never expire a real exchange in flight.
 */
import { BrokerEgress, DnsResolver, Egress } from "@crm-relay/bridge"
import { Clock, Effect, Layer } from "effect"
import * as BridgeLayers from "../../src/workers/BridgeLayers.js"

/** The name of the loopback bridges. */
export const BRIDGE_HOST = "bridge.localhost"
/** The name of the loopback webhook receiver. */
export const RECEIVER_HOST = "hooks.localhost"
/** The name of the loopback brokers. */
export const BROKER_HOST = "broker.localhost"
/** Resolves to a private address outside the allowed loopback range. */
export const PRIVATE_HOST = "private.localhost"

/** Egress, clients and token cache toward the loopback servers whose certificates `cas` issued. */
export const bridgeSide = (cas: ReadonlyArray<string>) =>
  BridgeLayers.layerWith(
    Layer.scopedContext(
      Effect.withClock(
        Layer.build(
          Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: cas }).pipe(
            Layer.provide(DnsResolver.layerStatic({
              [BRIDGE_HOST]: ["127.0.0.1"],
              [RECEIVER_HOST]: ["127.0.0.1"],
              [PRIVATE_HOST]: ["10.20.30.40"]
            }))
          )
        ),
        Clock.make()
      )
    ),
    // Broker addresses under the same rules: loopback allowed (plain AMQP and NATS too), private.localhost refused.
    BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(
      Layer.provide(DnsResolver.layerStatic({ [BROKER_HOST]: ["127.0.0.1"], [PRIVATE_HOST]: ["10.20.30.40"] }))
    )
  )
