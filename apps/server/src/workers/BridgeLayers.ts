/**
 * The bridge side of the server, composed once: the safe egress (from
 * EGRESS_ALLOW_PRIVATE; Node trusts NODE_EXTRA_CA_CERTS itself), one OAuth
 * token cache per process, the transport registry (REST and MCP) and the
 * per-tenant client cache. The in-call API, the CRM push worker and the
 * webhook delivery worker all use these same services.
 */
import { BridgeClients, BrokerEgress, Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import { type ConfigError, Layer } from "effect"

/** What the bridge side provides. */
export type Services = BridgeClients | BrokerEgress | Egress | TokenCache | TransportRegistry

/**
 * The bridge side over `egress` and `brokers` (broker addresses, under the same rules; tests give
 * egresses that trust their CA and reach loopback).
 */
export const layerWith = <E, E2>(egress: Layer.Layer<Egress, E>, brokers: Layer.Layer<BrokerEgress, E2>): Layer.Layer<Services, E | E2> =>
  BridgeClients.DefaultWithoutDependencies.pipe(
    Layer.provideMerge(Layer.mergeAll(TokenCache.Default, TransportRegistry.Default, brokers)),
    Layer.provideMerge(egress)
  )

/** The bridge side over `egress`, broker addresses judged by EGRESS_ALLOW_PRIVATE. */
export const layer = <E>(egress: Layer.Layer<Egress, E>): Layer.Layer<Services, E | ConfigError.ConfigError> =>
  layerWith(egress, BrokerEgress.Default)

/** The bridge side configured from the environment. */
export const Live: Layer.Layer<Services, ConfigError.ConfigError> = layer(Egress.Default)
