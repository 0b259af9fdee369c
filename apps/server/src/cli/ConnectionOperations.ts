/**
 * What the CLI does to bridge connections and the master key, behind one
 * tag with two Layers (chosen by DataAccess): directly on the database —
 * with this process's MASTER_KEY and egress — or through the running
 * server's internal API, which then uses its own.
 */
import type { Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import { Connections } from "@crm-relay/calls"
import type { Conformance as Contract, Operations } from "@crm-relay/contract"
import { Migrations, Vault } from "@crm-relay/store"
import { Context, Effect, Layer, Option } from "effect"
import { AdminError, refused, unknownAccount } from "./AdminError.js"
import type { PageRequest } from "./AdminOperations.js"
import type { ConnectionRequest, ConnectionView, RotationAnswer } from "@crm-relay/contract/InternalApi/ConnectionsApi"
import { messages, toSettings } from "../http/internal/ConnectionsApiLive.js"
import type { ConnectionPage } from "@crm-relay/contract/InternalApi/ListingsApi"
import { connectionView } from "../http/internal/ListingsApiLive.js"
import * as BridgeLayers from "../workers/BridgeLayers.js"
import * as ConnectionsLayers from "../workers/ConnectionsLayers.js"
import * as StoredConnectionCheck from "../workers/StoredConnectionCheck.js"
import * as MasterKey from "../config/MasterKey.js"
import type { CliSettings } from "../config/Settings.js"
import * as DataAccess from "./DataAccess.js"

/** Connection and master-key operations for the CLI. */
export class ConnectionOperations extends Context.Tag("@crm-relay/server/ConnectionOperations")<ConnectionOperations, {
  /** Runs the capabilities check with `request` and stores the connection when it passes. */
  readonly set: (
    accountId: string,
    tenantId: string,
    request: ConnectionRequest
  ) => Effect.Effect<Operations.CapabilitiesResponse, AdminError>
  /** Runs the capabilities check on the stored connection and stores the capabilities. */
  readonly test: (accountId: string, tenantId: string) => Effect.Effect<Operations.CapabilitiesResponse, AdminError>
  /** A page of the account's connections, by tenant id (never a secret). */
  readonly list: (accountId: string, page: PageRequest) => Effect.Effect<ConnectionPage, AdminError>
  /** Runs the bridge conformance check on the tenant's stored connection (`writes`: the write level too). */
  readonly check: (accountId: string, tenantId: string, writes: boolean) => Effect.Effect<Contract.Report, AdminError>
  /** The tenant's stored connection (never the secret). */
  readonly show: (accountId: string, tenantId: string) => Effect.Effect<ConnectionView, AdminError>
  /** Deletes the tenant's connection and its sealed secret. */
  readonly remove: (accountId: string, tenantId: string) => Effect.Effect<void, AdminError>
  /**
   * Re-seals every secret under a new data key wrapped under the master key
   * `masterKeyId` (the operator's MASTER_KEY; a running server refuses when
   * its own is another one), or under this process's keys when none is given.
   */
  /**
   * Re-seals every secret under a new data key. `onProgress` hears the count
   * done on the database directly; a running server rotates in one request,
   * so through it only the final answer comes.
   */
  readonly rotate: (
    masterKeyId: Option.Option<string>,
    onProgress: (done: number, total: number) => Effect.Effect<void>
  ) => Effect.Effect<RotationAnswer, AdminError>
}>() {}

/** The CLI flag of a connection-form field, so a refusal points at what to fix on the command line. */
export const FLAGS: Readonly<Record<string, string>> = {
  transport: "--transport",
  url: "--url",
  tenant: "--tenant",
  "auth.key": "--api-key",
  "auth.token_url": "--token-url",
  "auth.client_id": "--client-id",
  "auth.client_secret": "--client-secret",
  "auth.scope": "--scope"
}

const invalid = (field: string | undefined, message: string) =>
  refused(field === undefined ? message : `${FLAGS[field] ?? field}: ${message}`)

const noConnection = (tenantId: string) => refused(messages.noConnection(tenantId))

const explain = (error: Connections.ConnectError | Connections.ConnectionNotFound): AdminError => {
  switch (error._tag) {
    case "AccountNotFound":
      return unknownAccount(error.accountId)
    case "InvalidConnection":
      return invalid(error.field, error.message)
    case "ConnectionNotAllowed":
    case "ConnectionNotFound":
      return refused(error.message)
    case "CheckFailed":
      return new AdminError({
        // A diagnosed failure already names its next step; otherwise an unreachable bridge is worth another try.
        message: error.reason === "unreachable" && error.diagnosis === undefined
          ? `${error.message} Nothing was stored; try again later.`
          : `${error.message} Nothing was stored.`
      })
  }
}

const defect = (cause: unknown) =>
  Effect.fail(new AdminError({ message: `The command failed: ${cause instanceof Error ? cause.message : String(cause)}.` }))

const answer = (report: Vault.RotationReport, masterKeyId: string): RotationAnswer => ({
  key_id: report.keyId,
  master_key_id: masterKeyId,
  resealed: report.resealed,
  undecryptable: report.undecryptable,
  deleted_keys: report.deletedKeys
})

/** On the database of the context (migrated first), with the master keys of `settings`. */
export const layerDirect = (settings: CliSettings) =>
  Layer.unwrapEffect(
    Effect.map(
      MasterKey.resolve(settings).pipe(Effect.mapError((error) => refused(error.message))),
      (keys) =>
        Layer.effect(
          ConnectionOperations,
          Effect.gen(function*() {
            const connections = yield* Connections.Connections
            const vault = yield* Vault.Vault
            const bridgeSide = yield* Effect.context<Egress | TokenCache | TransportRegistry>()
            return ConnectionOperations.of({
              check: (accountId, tenantId, writes) =>
                StoredConnectionCheck.run(connections, accountId, tenantId, writes).pipe(
                  Effect.provide(bridgeSide),
                  Effect.mapError((error) => {
                    switch (error._tag) {
                      case "AccountNotFound":
                        return unknownAccount(accountId)
                      case "ConnectionNotFound":
                        return noConnection(tenantId)
                      case "InvalidConnection":
                        return invalid(error.field, error.message)
                    }
                  }),
                  Effect.catchAllDefect(defect)
                ),
              set: (accountId, tenantId, request) =>
                connections.set(accountId, tenantId, toSettings(request)).pipe(
                  Effect.mapError(explain),
                  Effect.catchAllDefect(defect)
                ),
              test: (accountId, tenantId) =>
                connections.test(accountId, tenantId).pipe(Effect.mapError(explain), Effect.catchAllDefect(defect)),
              list: (accountId, page) =>
                connections.list(accountId, { limit: page.limit, cursor: Option.getOrUndefined(page.cursor) }).pipe(
                  Effect.map((found) => ({
                    connections: found.connections.map((c) => connectionView(accountId, c)),
                    next_cursor: Option.getOrNull(found.nextCursor)
                  })),
                  Effect.mapError(explain),
                  Effect.catchAllDefect(defect)
                ),
              show: (accountId, tenantId) =>
                connections.summary(accountId, tenantId).pipe(
                  Effect.mapError(explain),
                  Effect.flatMap(Option.match({
                    onNone: () => Effect.fail(noConnection(tenantId)),
                    onSome: (c) => Effect.succeed(connectionView(accountId, c))
                  })),
                  Effect.catchAllDefect(defect)
                ),
              remove: (accountId, tenantId) =>
                connections.remove(accountId, tenantId).pipe(Effect.mapError(explain), Effect.catchAllDefect(defect)),
              rotate: (_, onProgress) =>
                vault.rotate({ onProgress }).pipe(
                Effect.map((report) => answer(report, vault.masterKeyId)),
                Effect.mapError((error) => new AdminError({ message: error.message })),
                Effect.catchAllDefect(defect)
              )
            })
          })
        ).pipe(
          Layer.provide(ConnectionsLayers.layer(keys)),
          Layer.provide(BridgeLayers.Live),
          Layer.provide(Migrations.layer),
          Layer.catchAll((error) =>
            Layer.fail(
              error._tag === "VaultError"
                ? new AdminError({ message: error.message })
                : error._tag === "MigrationError"
                ? new AdminError({ message: `Migrations failed: ${error.message}` })
                : error._tag === "SqlError"
                ? new AdminError({ message: `The database failed: ${error.message}.` })
                : new AdminError({ message: `Invalid configuration: ${String(error)}` })
            )
          )
        )
    )
  )

/** Through the internal API of the server at `baseUrl`. */
export const layerRemote = DataAccess.layerRemote(ConnectionOperations, ({ baseUrl, client, explain: explainRemote, failed }) => {
  const fail = (error: { readonly _tag: string; readonly error?: unknown; readonly field?: unknown }): AdminError => {
    const sentence = typeof error.error === "string" ? error.error : undefined
    switch (error._tag) {
      case "InvalidSettings":
        return invalid(typeof error.field === "string" ? error.field : undefined, sentence ?? "The request was refused.")
      case "CheckRefused":
      case "Unavailable":
        return new AdminError({ message: sentence ?? `The running server at ${baseUrl} refused the request.` })
      default:
        return sentence === undefined ? failed(error) : explainRemote(error)
    }
  }
  const path = (id: string, tenantId: string) => ({ path: { id, tenantId } })
  return ConnectionOperations.of({
    set: (accountId, tenantId, request) =>
      client.connections.set({ ...path(accountId, tenantId), payload: request }).pipe(
        Effect.map((a) => a.capabilities),
        Effect.mapError(fail)
      ),
    test: (accountId, tenantId) =>
      client.connections.test(path(accountId, tenantId)).pipe(Effect.map((a) => a.capabilities), Effect.mapError(fail)),
    list: (accountId, page) =>
      client.connectionListing.list({
        path: { id: accountId },
        urlParams: { limit: page.limit, ...(Option.isSome(page.cursor) ? { cursor: page.cursor.value } : {}) }
      }).pipe(Effect.mapError(fail)),
    check: (accountId, tenantId, writes) =>
      client.connections.check({ ...path(accountId, tenantId), payload: { writes } }).pipe(Effect.mapError(fail)),
    show: (accountId, tenantId) => client.connections.get(path(accountId, tenantId)).pipe(Effect.mapError(fail)),
    remove: (accountId, tenantId) => client.connectionListing.remove(path(accountId, tenantId)).pipe(Effect.mapError(fail)),
    rotate: (masterKeyId) =>
      client.masterKey.rotate({ urlParams: Option.isSome(masterKeyId) ? { master_key_id: masterKeyId.value } : {} }).pipe(
        Effect.mapError(fail)
      )
  })
})

/** Chooses how to reach the data (see DataAccess). */
export const layerFromSettings = (settings: CliSettings): Layer.Layer<ConnectionOperations, AdminError> =>
  DataAccess.layerFromSettings(settings, { direct: layerDirect(settings), remote: layerRemote })

/** Runs a CLI command with the operations for this environment (see DataAccess.withOperations). */
export const withOperations = DataAccess.withOperations(ConnectionOperations, layerFromSettings)
