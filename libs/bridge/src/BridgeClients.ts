/**
 * Clients for many tenants in one process. A Connection picks its transport
 * Layer from the TransportRegistry (by kind) and its Credentials Layer (by
 * credential type); the built client is cached per account and tenant and
 * rebuilt when the connection's configuration changes.
 */
import { createHash } from "node:crypto"
import { Context, Effect, Layer, Redacted } from "effect"
import * as ApiKeyCredentials from "./ApiKeyCredentials.js"
import { BridgeClient } from "./BridgeClient.js"
import type { Connection } from "./Connection.js"
import type { Credentials } from "./Credentials.js"
import type { Egress } from "./Egress.js"
import { InvalidConnection } from "./InvalidConnection.js"
import * as OAuthCredentials from "./OAuthCredentials.js"
import { TokenCache } from "./TokenCache.js"
import { TransportRegistry } from "./TransportRegistry.js"

/** How many built clients are kept; the least recently used is dropped beyond it. */
export const MAX_CACHED_CLIENTS = 10_000

/** The Credentials Layer of a connection's credential type. */
export const credentialsLayer = (
  connection: Connection
): Layer.Layer<Credentials, InvalidConnection, Egress | TokenCache> => {
  const auth = connection.auth
  return auth.type === "api_key"
    ? ApiKeyCredentials.layer(auth.key)
    : OAuthCredentials.layer({
      tokenUrl: auth.tokenUrl,
      clientId: auth.clientId,
      clientSecret: auth.clientSecret,
      scope: auth.scope,
      binding: {
        tenantId: connection.tenantId,
        accountId: connection.accountId,
        endpoint: `${connection.transport.kind} ${connection.transport.url}`,
        configuration: String(connection.version)
      }
    })
}

/** The BridgeClient Layer of one connection (for a single connection, e.g. the connection form's check). */
export const connectionLayer = (
  connection: Connection
): Layer.Layer<BridgeClient, InvalidConnection, Egress | TokenCache | TransportRegistry> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      if (connection.tenantId === "") {
        return yield* new InvalidConnection({ field: "tenant", message: "The tenant ID must not be empty." })
      }
      const registry = yield* TransportRegistry
      const transport = yield* registry.layer(connection.transport.kind, connection.transport.url)
      return BridgeClient.layer({ tenantId: connection.tenantId }).pipe(
        Layer.provide(Layer.merge(transport, credentialsLayer(connection)))
      )
    })
  )

// Everything that configures a client; secrets enter only as digests.
const fingerprint = (connection: Connection): string => {
  const digest = (secret: Redacted.Redacted<string>) =>
    createHash("sha256").update(Redacted.value(secret), "utf8").digest("hex")
  const auth = connection.auth
  return createHash("sha256").update(JSON.stringify([
    connection.accountId,
    connection.tenantId,
    connection.version,
    connection.transport.kind,
    connection.transport.url,
    auth.type === "api_key"
      ? ["api_key", digest(auth.key)]
      : ["oauth", auth.tokenUrl, auth.clientId, digest(auth.clientSecret), auth.scope ?? null]
  ])).digest("hex")
}

/** Built clients by account and tenant, for a process that serves many tenants. */
export class BridgeClients extends Effect.Service<BridgeClients>()("@crm-relay/bridge/BridgeClients", {
  scoped: Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<Egress | TokenCache | TransportRegistry>()
    const clients = new Map<string, { readonly fingerprint: string; readonly client: BridgeClient["Type"] }>()
    const identity = (connection: Connection) => JSON.stringify([connection.accountId, connection.tenantId])

    return {
      /** The client of `connection`, built once per configuration and reused across calls. */
      forConnection: (connection: Connection): Effect.Effect<BridgeClient["Type"], InvalidConnection> =>
        Effect.suspend(() => {
          const id = identity(connection)
          const print = fingerprint(connection)
          const cached = clients.get(id)
          if (cached !== undefined && cached.fingerprint === print) {
            clients.delete(id)
            clients.set(id, cached)
            return Effect.succeed(cached.client)
          }
          return Layer.buildWithScope(connectionLayer(connection), scope).pipe(
            Effect.provide(context),
            Effect.map((built) => {
              const client = Context.get(built, BridgeClient)
              clients.delete(id)
              clients.set(id, { fingerprint: print, client })
              if (clients.size > MAX_CACHED_CLIENTS) {
                const oldest = clients.keys().next()
                if (oldest.done !== true) clients.delete(oldest.value)
              }
              return client
            })
          )
        }),
      /** Drops the cached client of an account's tenant (after its connection was removed). */
      forget: (accountId: string, tenantId: string): Effect.Effect<void> =>
        Effect.sync(() => {
          clients.delete(JSON.stringify([accountId, tenantId]))
        })
    }
  }),
  dependencies: [TokenCache.Default]
}) {}
