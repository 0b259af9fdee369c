/**
 * The bridge side of the server, composed once: the safe egress (from
 * EGRESS_ALLOW_PRIVATE; Node trusts NODE_EXTRA_CA_CERTS itself), one OAuth
 * token cache per process, the transport registry (REST and MCP) and the
 * per-tenant client cache. The in-call API, the CRM push worker and the
 * webhook delivery worker all use these same services.
 */
import { BridgeClients, Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import { type ConfigError, Layer } from "effect"

/** What the bridge side provides. */
export type Services = BridgeClients | Egress | TokenCache | TransportRegistry

/** The bridge side over `egress` (tests give an egress that trusts their CA and reaches loopback). */
export const layer = <E>(egress: Layer.Layer<Egress, E>): Layer.Layer<Services, E> =>
  BridgeClients.DefaultWithoutDependencies.pipe(
    Layer.provideMerge(Layer.mergeAll(TokenCache.Default, TransportRegistry.Default)),
    Layer.provideMerge(egress)
  )

/** The bridge side configured from the environment. */
export const Live: Layer.Layer<Services, ConfigError.ConfigError> = layer(Egress.Default)
