/**
 * The reference bridge (apps/reference-bridge) in process, and real clients
 * toward it through the real safe egress: `bridge.localhost` is pinned to
 * 127.0.0.1 by a static resolver, the bridge's CA is trusted.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { BridgeClient } from "../../src/BridgeClient.js"
import { connectionLayer } from "../../src/BridgeClients.js"
import type { Connection } from "../../src/Connection.js"
import { DnsResolver } from "../../src/DnsResolver.js"
import { Egress } from "../../src/Egress.js"
import { TokenCache } from "../../src/TokenCache.js"
import { TransportRegistry } from "../../src/TransportRegistry.js"
import type { CredentialKind, TransportKind } from "./Harness.js"
import { onLiveClock } from "./Harness.js"

export const HOST = "bridge.localhost"

/** Tenants of the reference bridge: t-1 and t-2 as the main pair, t-short and t-omit for the token cache rules. */
export const TENANTS = {
  main: { tenantId: "t-1", apiKey: "key-1_visible~ASCII", clientId: "client one", clientSecret: "secret: one&two", expiresIn: 3600 },
  other: { tenantId: "t-2", apiKey: "key-2" },
  short: { tenantId: "t-short", clientId: "client-short", clientSecret: "secret-short", expiresIn: 30 },
  omit: { tenantId: "t-omit", clientId: "client-omit", clientSecret: "secret-omit" }
} as const

/** The reference bridge and everything a client needs toward it. */
export const layer = Layer.unwrapEffect(
  Effect.map(ReferenceBridge.ReferenceBridge, (bridge) =>
    Layer.mergeAll(
      Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: bridge.ca }).pipe(
        Layer.provide(DnsResolver.layerStatic({ [HOST]: ["127.0.0.1"] }))
      ).pipe(onLiveClock),
      TokenCache.Default,
      TransportRegistry.Default
    ))
).pipe(
  Layer.provideMerge(ReferenceBridge.layer({
    urlHost: HOST,
    tenants: [
      {
        tenantId: TENANTS.main.tenantId,
        apiKey: TENANTS.main.apiKey,
        oauth: { clientId: TENANTS.main.clientId, clientSecret: TENANTS.main.clientSecret, expiresIn: TENANTS.main.expiresIn }
      },
      { tenantId: TENANTS.other.tenantId, apiKey: TENANTS.other.apiKey },
      {
        tenantId: TENANTS.short.tenantId,
        oauth: { clientId: TENANTS.short.clientId, clientSecret: TENANTS.short.clientSecret, expiresIn: TENANTS.short.expiresIn }
      },
      { tenantId: TENANTS.omit.tenantId, oauth: { clientId: TENANTS.omit.clientId, clientSecret: TENANTS.omit.clientSecret, expiresIn: "omit" } }
    ]
  })),
  Layer.orDie
)

/** A connection of tenant t-1 (or `tenantId`) to the reference bridge. */
export const connection = (
  bridge: ReferenceBridge.ReferenceBridgeHandle,
  spec: {
    readonly transport: TransportKind
    readonly auth: CredentialKind
    readonly tenantId?: string
    readonly oauthClient?: { readonly clientId: string; readonly clientSecret: string }
  }
): Connection => ({
  accountId: "account-1",
  tenantId: spec.tenantId ?? TENANTS.main.tenantId,
  version: 1,
  transport: { kind: spec.transport, url: spec.transport === "rest" ? bridge.restBaseUrl : bridge.mcpUrl },
  auth: spec.auth === "api_key"
    ? { type: "api_key", key: Redacted.make(TENANTS.main.apiKey) }
    : {
      type: "oauth",
      tokenUrl: bridge.tokenUrl,
      clientId: spec.oauthClient?.clientId ?? TENANTS.main.clientId,
      clientSecret: Redacted.make(spec.oauthClient?.clientSecret ?? TENANTS.main.clientSecret)
    }
})

/** Resets the bridge and the token cache, then builds a client for `spec`. */
export const client = (spec: Parameters<typeof connection>[1]) =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.ReferenceBridge
    yield* bridge.control.reset
    yield* (yield* TokenCache).clear
    const built = yield* Effect.scoped(Layer.build(connectionLayer(connection(bridge, spec))))
    return { bridge, client: Context.get(built, BridgeClient) }
  })

/** The requests the bridge received on its bridge transports (the token endpoint left out). */
export const bridgeRequests = (bridge: ReferenceBridge.ReferenceBridgeHandle) =>
  Effect.map(bridge.control.received, (all) => all.filter((r) => r.transport !== "oauth"))
