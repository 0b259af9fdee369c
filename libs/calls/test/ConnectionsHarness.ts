/**
 * Connections and in-call operations against the reference bridge
 * (apps/reference-bridge) over real TLS on loopback, through the real safe
 * egress (`bridge.localhost` pinned to 127.0.0.1 by a static resolver, the
 * bridge's CA trusted, loopback allowed as EGRESS_ALLOW_PRIVATE would), on a
 * real test database with a Vault.
 */
import { BridgeClients, DnsResolver, Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import { Accounts } from "@crm-relay/events"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import * as TestTenants from "@crm-relay/reference-bridge/TestTenants"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Clock, Effect, Layer, Logger, LogLevel, Redacted } from "effect"
import type { ConnectionSettings } from "../src/Connections.js"
import { Connections } from "../src/Connections.js"

export const HOST = "bridge.localhost"

/** The bridge's tenants: t-1 with an API key and an OAuth client, t-2 with a key only. */
export const { OTHER, TENANT } = TestTenants

export const TRANSPORTS = ["rest", "mcp"] as const
export const CREDENTIALS = ["api_key", "oauth"] as const
export const MATRIX = TRANSPORTS.flatMap((transport) => CREDENTIALS.map((auth) => ({ transport, auth })))

/** Builds `layer` on the live clock, so TestClock jumps never expire a real exchange in flight. */
export const onLiveClock = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.scopedContext(Effect.withClock(Layer.build(layer), Clock.make()))

/** The reference bridge serving TENANT and OTHER. */
export const BridgeLive = TestTenants.layer(HOST)

/** Egress toward the bridge, one token cache, the two transports, and clients per connection. */
export const OutboundLive = Layer.unwrapEffect(
  Effect.map(ReferenceBridge.ReferenceBridge, (bridge) =>
    Layer.mergeAll(BridgeClients.DefaultWithoutDependencies, TransportRegistry.Default).pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          onLiveClock(
            Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: bridge.ca }).pipe(
              Layer.provide(DnsResolver.layerStatic({ [HOST]: ["127.0.0.1"] }))
            )
          ),
          TokenCache.Default,
          TransportRegistry.Default
        )
      )
    ))
)

/** One MASTER_KEY for the test database. */
export const masterKeys = Vault.randomMasterKeys()

/** Accounts, Vault and Connections over a test database, with the bridge and the outbound services. */
export const ConnectionsLive = Layer.mergeAll(Connections.Default, Accounts.Accounts.Default).pipe(
  Layer.provideMerge(Vault.layer(masterKeys)),
  Layer.provideMerge(OutboundLive),
  Layer.provideMerge(TestDatabase.layer),
  Layer.provideMerge(BridgeLive),
  Layer.orDie
)

/** The settings of the connection form for tenant t-1 over `transport` with `auth`. */
export const settings = (
  bridge: ReferenceBridge.ReferenceBridgeHandle,
  spec: { readonly transport: "rest" | "mcp"; readonly auth: "api_key" | "oauth" }
): ConnectionSettings => ({
  transport: spec.transport,
  url: spec.transport === "rest" ? bridge.restBaseUrl : bridge.mcpUrl,
  auth: spec.auth === "api_key"
    ? { type: "api_key", key: Redacted.make(TENANT.apiKey) }
    : { type: "oauth", tokenUrl: bridge.tokenUrl, clientId: TENANT.clientId, clientSecret: Redacted.make(TENANT.clientSecret) }
})

/** A new account of `mode`. */
export const account = (mode: Accounts.AccountMode = "live") =>
  Effect.flatMap(Accounts.Accounts, (accounts) => accounts.create({ name: `Test ${mode}`, mode }))

/** The requests the bridge received on its bridge transports (the token endpoint left out). */
export const bridgeRequests = Effect.flatMap(
  ReferenceBridge.ReferenceBridge,
  (bridge) => Effect.map(bridge.control.received, (all) => all.filter((r) => r.transport !== "oauth"))
)

/** Resets the bridge (faults, received log, records, grants). */
export const resetBridge = Effect.flatMap(ReferenceBridge.ReferenceBridge, (bridge) => bridge.control.reset)

/** Runs `effect` capturing every log line (message, annotations, cause) at every level. */
export const captureLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ annotations, cause, message }) => {
      lines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations), cause: String(cause) }))
    })
    const exit = yield* Effect.exit(
      effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.All))
    )
    return { exit, lines }
  })
