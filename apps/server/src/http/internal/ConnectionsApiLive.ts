/**
 * Handlers of the connections, signing-secret and master-key groups of the
 * internal API (see ConnectionsApi for the statuses).
 */
import { HttpApiBuilder } from "@effect/platform"
import { type Egress, type TokenCache, type TransportRegistry } from "@crm-relay/bridge"
import { Connections } from "@crm-relay/calls"
import { Events } from "@crm-relay/contract"
import { SigningSecrets } from "@crm-relay/events"
import { Vault } from "@crm-relay/store"
import { Effect, Layer, Option, Redacted } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import * as StoredConnectionCheck from "../../workers/StoredConnectionCheck.js"
import { CheckRefused, ConnectionNotAllowed, type ConnectionRequest, type ConnectionView, InvalidSettings, RotationRefused } from "@crm-relay/contract/InternalApi/ConnectionsApi"

/** Sentences of these groups' errors. */
export const messages = {
  noConnection: (tenantId: string) => `Tenant ${tenantId} has no bridge connection; set one first.`,
  otherMasterKey: (server: string, asked: string) =>
    `The running server encrypts under master key ${server}, not under the MASTER_KEY given to the command (${asked}); ` +
    "nothing was changed. Restart the server with MASTER_KEY=<new key> and MASTER_KEY_PREVIOUS=<old key>, then run " +
    "`crm-relay master-key rotate` again with the same MASTER_KEY."
} as const

/** The connection form's body as the Connections service takes it. */
export const toSettings = (request: ConnectionRequest): Connections.ConnectionSettings => ({
  transport: request.transport,
  url: request.url,
  auth: request.auth.type === "api_key"
    ? { type: "api_key", key: request.auth.key }
    : {
      type: "oauth",
      tokenUrl: request.auth.token_url,
      clientId: request.auth.client_id,
      clientSecret: request.auth.client_secret,
      ...(request.auth.scope === undefined ? {} : { scope: request.auth.scope })
    }
})

/** The internal API's error for a failed set or test of a connection. */
const toApiError = (
  error: Connections.ConnectError | Connections.ConnectionNotFound
): Events.NotFound | Events.Unavailable | ConnectionNotAllowed | InvalidSettings | CheckRefused => {
  switch (error._tag) {
    case "AccountNotFound":
      return unknownAccount()
    case "ConnectionNotFound":
      return new Events.NotFound({ error: messages.noConnection(error.tenantId) })
    case "ConnectionNotAllowed":
      return new ConnectionNotAllowed({ error: error.message })
    case "InvalidConnection":
      return new InvalidSettings({ error: error.message, field: error.field })
    case "CheckFailed":
      return error.reason === "unreachable"
        ? new Events.Unavailable({ error: error.message })
        : new CheckRefused({ error: error.message })
  }
}

const view = (state: Connections.StoredConnection): ConnectionView => {
  const { auth, ...connection } = state.connection
  return {
    account_id: connection.accountId,
    tenant_id: connection.tenantId,
    transport: connection.transport.kind,
    url: connection.transport.url,
    version: connection.version,
    auth: auth.type === "api_key"
      ? { type: "api_key" }
      : {
        type: "oauth",
        token_url: auth.tokenUrl,
        client_id: auth.clientId,
        ...(auth.scope === undefined ? {} : { scope: auth.scope })
      },
    capabilities: state.capabilities,
    checked_at: state.checkedAt.toISOString()
  }
}

const ConnectionsLive = HttpApiBuilder.group(InternalApi, "connections", (handlers) =>
  Effect.gen(function*() {
    const connections = yield* Connections.Connections
    // The check speaks through the server's own egress, token cache and transports.
    const bridgeSide = yield* Effect.context<Egress | TokenCache | TransportRegistry>()
    return handlers
      .handle("set", ({ path, payload }) =>
        connections.set(path.id, path.tenantId, toSettings(payload)).pipe(
          Effect.map((capabilities) => ({ capabilities })),
          Effect.mapError(toApiError)
        ))
      .handle("test", ({ path }) =>
        connections.test(path.id, path.tenantId).pipe(
          Effect.map((capabilities) => ({ capabilities })),
          Effect.mapError(toApiError)
        ))
      .handle("check", ({ path, payload }) =>
        StoredConnectionCheck.run(connections, path.id, path.tenantId, payload.writes).pipe(
          Effect.provide(bridgeSide),
          Effect.mapError((error) => {
            switch (error._tag) {
              case "AccountNotFound":
                return unknownAccount()
              case "ConnectionNotFound":
                return new Events.NotFound({ error: messages.noConnection(error.tenantId) })
              case "InvalidConnection":
                return new InvalidSettings({ error: error.message, field: error.field })
            }
          })
        ))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const state = yield* connections.state(path.id, path.tenantId)
          if (Option.isNone(state)) return yield* unknownAccount()
          if (Option.isNone(state.value.connection)) {
            return yield* new Events.NotFound({ error: messages.noConnection(path.tenantId) })
          }
          return view(state.value.connection.value)
        }))
  }))

const SigningSecretLive = HttpApiBuilder.group(InternalApi, "signingSecret", (handlers) =>
  Effect.gen(function*() {
    const secrets = yield* SigningSecrets.SigningSecrets
    return handlers.handle("get", ({ path }) =>
      secrets.get(path.id).pipe(
        Effect.map((secret) => ({ secret: Redacted.value(secret) })),
        Effect.catchTag("AccountNotFound", unknownAccount)
      ))
  }))

const MasterKeyLive = HttpApiBuilder.group(InternalApi, "masterKey", (handlers) =>
  Effect.gen(function*() {
    const vault = yield* Vault.Vault
    return handlers.handle("rotate", ({ urlParams }) => {
      const asked = urlParams.master_key_id
      // The rotation the caller asked for, or none: never one under a master key it did not name.
      const rotation: Effect.Effect<Vault.RotationReport, Vault.VaultError | RotationRefused> =
        asked !== undefined && asked !== vault.masterKeyId
          ? Effect.fail(new RotationRefused({ error: messages.otherMasterKey(vault.masterKeyId, asked) }))
          : vault.rotate()
      return rotation.pipe(
        Effect.map((report) => ({
          key_id: report.keyId,
          master_key_id: vault.masterKeyId,
          resealed: report.resealed,
          undecryptable: report.undecryptable,
          deleted_keys: report.deletedKeys
        })),
        Effect.catchTag("VaultError", (error) => new RotationRefused({ error: error.message }))
      )
    })
  }))

/** The handlers of the connections, signing-secret and master-key groups. */
export const layer = Layer.mergeAll(ConnectionsLive, SigningSecretLive, MasterKeyLive)
