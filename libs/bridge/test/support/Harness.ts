/**
 * Builds real clients against the fake bridge: the real safe egress (loopback
 * allowed, the test CA trusted, `bridge.localhost` pinned to 127.0.0.1 by a
 * static resolver) and the real transport and credentials Layers.
 */
import { Clock, Context, Effect, Layer, Redacted } from "effect"
import { BridgeClient } from "../../src/BridgeClient.js"
import { connectionLayer } from "../../src/BridgeClients.js"
import type { Connection } from "../../src/Connection.js"
import { DnsResolver } from "../../src/DnsResolver.js"
import { Egress } from "../../src/Egress.js"
import { TokenCache } from "../../src/TokenCache.js"
import { TransportRegistry } from "../../src/TransportRegistry.js"
import * as FakeBridge from "./FakeBridge.js"

/** The two transports and the two credential kinds: every rule is proven on all four. */
export const TRANSPORTS = ["rest", "mcp"] as const
export const CREDENTIALS = ["api_key", "oauth"] as const
export type TransportKind = typeof TRANSPORTS[number]
export type CredentialKind = typeof CREDENTIALS[number]
export const MATRIX = TRANSPORTS.flatMap((transport) => CREDENTIALS.map((auth) => ({ transport, auth })))

export const TENANT = "tenant-1"
export const ACCOUNT = "account-1"

/**
 * Builds `layer` on the live clock: egress deadlines bound real I/O, so advancing the TestClock
 * (retry delays, token lifetimes, the in-call budget) must not expire an exchange still in flight.
 */
export const onLiveClock = <A, E>(layer: Layer.Layer<A, E>): Layer.Layer<A, E> =>
  Layer.scopedContext(Effect.withClock(Layer.build(layer), Clock.make()))

/** Everything a client test needs: the fake, egress toward it, the token cache, the registry. */
export const layer = Layer.unwrapEffect(
  Effect.map(FakeBridge.FakeBridge, (fake) =>
    Layer.mergeAll(
      Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: fake.tls.ca }).pipe(
        Layer.provide(DnsResolver.layerStatic({ [FakeBridge.BRIDGE_HOST]: ["127.0.0.1"] }))
      ).pipe(onLiveClock),
      TokenCache.Default,
      TransportRegistry.Default
    ))
).pipe(Layer.provideMerge(FakeBridge.layer))

/** A connection to the fake over `transport` with `auth`. */
export const connection = (
  fake: FakeBridge.FakeBridgeState,
  spec: { readonly transport: TransportKind; readonly auth: CredentialKind; readonly scope?: string; readonly version?: number }
): Connection => ({
  accountId: ACCOUNT,
  tenantId: TENANT,
  version: spec.version ?? 1,
  transport: { kind: spec.transport, url: spec.transport === "rest" ? fake.restUrl : fake.mcpUrl },
  auth: spec.auth === "api_key"
    ? { type: "api_key", key: Redacted.make(FakeBridge.API_KEY) }
    : {
      type: "oauth",
      tokenUrl: fake.tokenUrl,
      clientId: FakeBridge.CLIENT_ID,
      clientSecret: Redacted.make(FakeBridge.CLIENT_SECRET),
      ...(spec.scope === undefined ? {} : { scope: spec.scope })
    }
})

/** Resets the fake and the token cache, then builds a client for `spec`. */
export const client = (
  spec: { readonly transport: TransportKind; readonly auth: CredentialKind; readonly scope?: string }
) =>
  Effect.gen(function*() {
    const fake = yield* FakeBridge.FakeBridge
    fake.reset()
    yield* (yield* TokenCache).clear
    const built = yield* Effect.scoped(Layer.build(connectionLayer(connection(fake, spec))))
    return { fake, client: Context.get(built, BridgeClient) }
  })

/** The client service type. */
export type Client = BridgeClient["Type"]
