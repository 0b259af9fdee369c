/**
 * Bridge connections: one per client tenant of an account, as the
 * connection form records it (transport, URL, API key or OAuth client
 * credentials), with the bridge's capabilities from the last check.
 *
 * - Connecting runs the capabilities check only (it writes nothing at the
 *   bridge), with the new configuration and before anything is stored; a
 *   failed check stores nothing.
 * - Demo and sandbox accounts cannot connect a bridge (they never reach a
 *   real CRM), and `find` never returns a connection for them.
 * - The secret part of the credential (API key or client secret) is sealed
 *   by the Vault, bound to account, tenant, this configuration's id and the
 *   field; everything else is stored in the clear.
 * - Every change gets a new configuration id and a higher version, so cached
 *   clients and OAuth tokens of the old configuration are never reused.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import {
  type BridgeError,
  BridgeClient,
  BridgeClients,
  type Connection,
  type Diagnosis,
  connectionLayer,
  type Egress,
  InvalidConnection,
  type TokenCache,
  type TransportRegistry
} from "@crm-relay/bridge"
import { Operations } from "@crm-relay/contract"
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import { Vault } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"

/** What the connection form submits: the transport kind and URL, and one credential. */
export interface ConnectionSettings {
  /** A kind of the TransportRegistry: `rest` or `mcp`. */
  readonly transport: string
  /** `{bridge_base_url}` for REST, the full `{mcp_url}` for MCP. */
  readonly url: string
  readonly auth: Connection.ConnectionAuth
}

/** A tenant's stored connection: decrypted, ready for `BridgeClients.forConnection`. */
export interface StoredConnection {
  readonly connection: Connection.Connection
  /** What the bridge answered to the last successful capabilities check. */
  readonly capabilities: Operations.CapabilitiesResponse
  readonly checkedAt: Date
}

/** An account's mode and its tenant's connection (of any mode; `find` filters). */
export interface TenantState {
  readonly mode: Accounts.AccountMode
  readonly connection: Option.Option<StoredConnection>
}

/** The account of the request does not exist. */
export const AccountNotFound = IntegrationKeys.AccountNotFound
export type AccountNotFound = IntegrationKeys.AccountNotFound

/** Demo and sandbox accounts cannot connect a bridge to a real CRM. */
export class ConnectionNotAllowed extends Data.TaggedError("ConnectionNotAllowed")<{
  readonly mode: Accounts.AccountMode
}> {
  override get message() {
    return `Demo and sandbox accounts cannot connect a bridge to a real CRM; this account's mode is ${this.mode}.`
  }
}

/** The tenant has no stored connection. */
export class ConnectionNotFound extends Data.TaggedError("ConnectionNotFound")<{
  readonly accountId: string
  readonly tenantId: string
}> {
  override get message() {
    return `Tenant ${this.tenantId} of account ${this.accountId} has no bridge connection; set one first.`
  }
}

/**
 * The capabilities check did not pass: `unreachable` (network failure,
 * deadline, 429 or 5xx: try again later) or `refused` (the credential, the
 * address or the bridge's answer must be fixed). Nothing was stored.
 */
export class CheckFailed extends Data.TaggedError("CheckFailed")<{
  readonly reason: "unreachable" | "refused"
  /** The bridge client's failure: which of the closed union, and its status. */
  readonly failure: BridgeError["_tag"]
  readonly status: number | null
  readonly detail: string
  /** Which network, TLS, policy or size failure it was, and the next step, when the exchange itself failed. */
  readonly diagnosis?: Diagnosis
}> {
  override get message() {
    return `The capabilities check did not pass: ${this.detail}`
  }
}

/** Why `set` or `test` did not store anything. */
export type ConnectError = AccountNotFound | ConnectionNotAllowed | InvalidConnection | CheckFailed

/** The secret's form field, also bound into its additional data. */
const secretField = (type: Connection.ConnectionAuth["type"]) => (type === "api_key" ? "auth.key" : "auth.client_secret")

/** The additional data of a connection's secret: account, tenant, configuration id and field. */
export const bindingOf = (accountId: string, tenantId: string, connectionId: string, field: string): string =>
  JSON.stringify(["crm-relay/connection/v1", accountId, tenantId, connectionId, field])

/** A URL for logs: scheme, host and path only (a refused URL may carry credentials or a query). */
const loggable = (url: string): string => {
  const parsed = URL.parse(url)
  return parsed === null ? "(not a URL)" : `${parsed.protocol}//${parsed.host}${parsed.pathname}`
}

const checkFailed = (error: BridgeError): CheckFailed =>
  new CheckFailed({
    reason: error._tag === "Transient" ? "unreachable" : "refused",
    failure: error._tag,
    status: error.status,
    detail: error.message,
    ...((error._tag === "Transient" || error._tag === "Permanent") && error.diagnosis !== undefined
      ? { diagnosis: error.diagnosis }
      : {})
  })

/** A stored connection in the operator's listing: everything but the secret, nothing decrypted. */
export interface ConnectionSummary {
  readonly tenantId: string
  readonly version: number
  readonly transport: string
  readonly url: string
  readonly auth: { readonly type: "api_key" } | {
    readonly type: "oauth"
    readonly tokenUrl: string
    readonly clientId: string
    readonly scope?: string
  }
  readonly capabilities: Operations.CapabilitiesResponse
  readonly checkedAt: Date
}

/** A page of an account's connections, by tenant id; `nextCursor` is the last tenant id shown. */
export interface ConnectionPage {
  readonly connections: ReadonlyArray<ConnectionSummary>
  readonly nextCursor: Option.Option<string>
}

interface SummaryRow {
  readonly tenant_id: string
  readonly version: number
  readonly transport: string
  readonly url: string
  readonly auth_type: "api_key" | "oauth"
  readonly token_url: string | null
  readonly client_id: string | null
  readonly scope: string | null
  readonly capabilities: unknown
  readonly checked_at: Date
}

interface Row {
  readonly mode: Accounts.AccountMode
  readonly id: string | null
  readonly version: number | null
  readonly transport: string | null
  readonly url: string | null
  readonly auth_type: "api_key" | "oauth" | null
  readonly token_url: string | null
  readonly client_id: string | null
  readonly scope: string | null
  readonly secret_id: string | null
  readonly capabilities: unknown
  readonly checked_at: Date | null
  readonly key_id: string | null
  readonly ciphertext: Uint8Array | null
}

/** Stores, checks and finds the bridge connections of client tenants. */
export class Connections extends Effect.Service<Connections>()("@crm-relay/calls/Connections", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vault = yield* Vault.Vault
    const clients = yield* BridgeClients
    const bridge = yield* Effect.context<Egress | TokenCache | TransportRegistry>()
    const decodeCapabilities = Schema.decodeUnknown(Operations.CapabilitiesResponse)
    const encodeCapabilities = Schema.encodeSync(Operations.CapabilitiesResponse)

    const load = (accountId: string, tenantId: string) =>
      sql<Row>`
        SELECT a.mode, c.id, c.version, c.transport, c.url, c.auth_type, c.token_url, c.client_id, c.scope,
               c.secret_id, c.capabilities, c.checked_at, v.key_id, v.ciphertext
        FROM accounts AS a
        LEFT JOIN connections AS c ON c.account_id = a.id AND c.tenant_id = ${tenantId}
        LEFT JOIN vault_secrets AS v ON v.id = c.secret_id
        WHERE a.id = ${accountId}`.pipe(Effect.orDie, Effect.map((rows) => Option.fromNullable(rows[0])))

    /** The stored connection of a row, its secret opened. */
    const stored = (accountId: string, tenantId: string, row: Row) =>
      Effect.gen(function*() {
        if (
          row.id === null || row.version === null || row.transport === null || row.url === null ||
          row.auth_type === null || row.secret_id === null || row.key_id === null || row.ciphertext === null ||
          row.checked_at === null
        ) return Option.none<StoredConnection>()
        const binding = bindingOf(accountId, tenantId, row.id, secretField(row.auth_type))
        const secret = yield* Effect.orDie(vault.open(row.secret_id, binding, { keyId: row.key_id, ciphertext: row.ciphertext }))
        const auth: Connection.ConnectionAuth = row.auth_type === "api_key"
          ? { type: "api_key", key: secret }
          : {
            type: "oauth",
            tokenUrl: row.token_url ?? "",
            clientId: row.client_id ?? "",
            clientSecret: secret,
            ...(row.scope === null ? {} : { scope: row.scope })
          }
        const capabilities = yield* Effect.orDie(decodeCapabilities(row.capabilities))
        return Option.some<StoredConnection>({
          connection: {
            accountId,
            tenantId,
            version: row.version,
            transport: { kind: row.transport, url: row.url },
            auth
          },
          capabilities,
          checkedAt: row.checked_at
        })
      })

    const state = (accountId: string, tenantId: string): Effect.Effect<Option.Option<TenantState>> =>
      Effect.gen(function*() {
        if (!isUuid(accountId)) return Option.none()
        const row = yield* load(accountId, tenantId)
        if (Option.isNone(row)) return Option.none()
        return Option.some({ mode: row.value.mode, connection: yield* stored(accountId, tenantId, row.value) })
      })

    /**
     * The account's row (and its tenant's connection, still sealed), refusing
     * unknown accounts and those that cannot connect. Nothing is decrypted, so
     * a connection whose secret no longer opens can still be set again.
     */
    const liveAccount = (accountId: string, tenantId: string) =>
      Effect.flatMap(
        isUuid(accountId) ? load(accountId, tenantId) : Effect.succeedNone,
        (found): Effect.Effect<Row, AccountNotFound | ConnectionNotAllowed> => {
          if (Option.isNone(found)) return Effect.fail(new AccountNotFound({ accountId }))
          if (found.value.mode !== "live") return Effect.fail(new ConnectionNotAllowed({ mode: found.value.mode }))
          return Effect.succeed(found.value)
        }
      )

    /** The capabilities check with exactly this configuration; nothing else is sent. */
    const check = (connection: Connection.Connection) =>
      Effect.scoped(
        Effect.flatMap(Layer.build(connectionLayer(connection)), (context) => Context.get(context, BridgeClient).connect())
      ).pipe(
        Effect.provide(bridge),
        Effect.mapError((error) => (error._tag === "InvalidConnection" ? error : checkFailed(error))),
        // What failed, for the operator; the messages are our own sentences and never carry a secret.
        Effect.tapError((error) =>
          Effect.logInfo("Bridge connection check did not pass").pipe(
            Effect.annotateLogs({
              account_id: connection.accountId,
              tenant_id: connection.tenantId,
              transport: connection.transport.kind,
              url: loggable(connection.transport.url),
              ...(error._tag === "InvalidConnection"
                ? { field: error.field, reason: error.message }
                : { failure: error.failure, status: error.status ?? "none", reason: error.detail })
            })
          )
        )
      )

    const save = (settings: ConnectionSettings, connection: Connection.Connection, connectionId: string, capabilities: Operations.CapabilitiesResponse) =>
      sql.withTransaction(Effect.gen(function*() {
        const { accountId, tenantId } = connection
        // One change at a time per tenant: the previous secret is the one this change replaces.
        yield* sql`SELECT pg_advisory_xact_lock(hashtext('crm-relay.connections'), hashtext(${`${accountId}/${tenantId}`}))`
        const previous = yield* sql<{ secret_id: string }>`
          SELECT secret_id FROM connections WHERE account_id = ${accountId} AND tenant_id = ${tenantId}`
        const auth = settings.auth
        const secret = auth.type === "api_key" ? auth.key : auth.clientSecret
        const secretId = yield* vault.store(secret, bindingOf(accountId, tenantId, connectionId, secretField(auth.type)))
        const oauth = auth.type === "oauth" ? auth : undefined
        const rows = yield* sql<{ version: number }>`
          INSERT INTO connections (
            account_id, tenant_id, id, version, transport, url, auth_type, token_url, client_id, scope,
            secret_id, capabilities, checked_at
          ) VALUES (
            ${accountId}, ${tenantId}, ${connectionId}, ${connection.version}, ${settings.transport}, ${settings.url},
            ${auth.type}, ${oauth?.tokenUrl ?? null}, ${oauth?.clientId ?? null}, ${oauth?.scope ?? null},
            ${secretId}, ${JSON.stringify(encodeCapabilities(capabilities))}::jsonb, now()
          )
          ON CONFLICT (account_id, tenant_id) DO UPDATE SET
            id = EXCLUDED.id,
            version = GREATEST(connections.version + 1, EXCLUDED.version),
            transport = EXCLUDED.transport,
            url = EXCLUDED.url,
            auth_type = EXCLUDED.auth_type,
            token_url = EXCLUDED.token_url,
            client_id = EXCLUDED.client_id,
            scope = EXCLUDED.scope,
            secret_id = EXCLUDED.secret_id,
            capabilities = EXCLUDED.capabilities,
            checked_at = EXCLUDED.checked_at,
            updated_at = now()
          RETURNING version`
        // The replaced secret goes, unless another connection (only ever by tampering) still points at it.
        for (const old of previous) {
          yield* sql`DELETE FROM vault_secrets AS v WHERE v.id = ${old.secret_id}
                     AND NOT EXISTS (SELECT 1 FROM connections AS c WHERE c.secret_id = v.id)`
        }
        return rows[0]!.version
      })).pipe(Effect.orDie)

    const summary = (row: SummaryRow) =>
      Effect.map(Effect.orDie(decodeCapabilities(row.capabilities)), (capabilities): ConnectionSummary => ({
        tenantId: row.tenant_id,
        version: row.version,
        transport: row.transport,
        url: row.url,
        auth: row.auth_type === "api_key"
          ? { type: "api_key" }
          : {
            type: "oauth",
            tokenUrl: row.token_url ?? "",
            clientId: row.client_id ?? "",
            ...(row.scope === null ? {} : { scope: row.scope })
          },
        capabilities,
        checkedAt: row.checked_at
      }))
    const accountExists = (accountId: string) =>
      isUuid(accountId)
        ? sql`SELECT 1 FROM accounts WHERE id = ${accountId}`.pipe(Effect.orDie, Effect.map((rows) => rows.length > 0))
        : Effect.succeed(false)

    return {
      /**
       * A page of the account's connections ordered by tenant id, after the
       * tenant `cursor` when given; nothing is decrypted.
       */
      list: Effect.fn("Connections.list")(function*(
        accountId: string,
        options: { readonly limit: number; readonly cursor?: string | undefined }
      ) {
        if (!(yield* accountExists(accountId))) return yield* new AccountNotFound({ accountId })
        const limit = Math.max(1, Math.trunc(options.limit))
        const after = options.cursor === undefined ? sql`` : sql`AND tenant_id > ${options.cursor}`
        const rows = yield* sql<SummaryRow>`
          SELECT tenant_id, version, transport, url, auth_type, token_url, client_id, scope, capabilities, checked_at
          FROM connections WHERE account_id = ${accountId} ${after}
          ORDER BY tenant_id LIMIT ${limit + 1}`.pipe(Effect.orDie)
        const connections = yield* Effect.forEach(rows.slice(0, limit), summary)
        return {
          connections,
          nextCursor: rows.length > limit ? Option.some(connections[connections.length - 1]!.tenantId) : Option.none()
        } satisfies ConnectionPage
      }),

      /** The tenant's connection as the listing shows it (nothing decrypted); none when there is none. */
      summary: Effect.fn("Connections.summary")(function*(accountId: string, tenantId: string) {
        if (!(yield* accountExists(accountId))) return yield* new AccountNotFound({ accountId })
        const rows = yield* sql<SummaryRow>`
          SELECT tenant_id, version, transport, url, auth_type, token_url, client_id, scope, capabilities, checked_at
          FROM connections WHERE account_id = ${accountId} AND tenant_id = ${tenantId}`.pipe(Effect.orDie)
        return rows[0] === undefined ? Option.none<ConnectionSummary>() : Option.some(yield* summary(rows[0]))
      }),

      /** Removes a tenant's connection and its sealed secret; ConnectionNotFound when there is none. */
      remove: Effect.fn("Connections.remove")(function*(accountId: string, tenantId: string) {
        if (!(yield* accountExists(accountId))) return yield* new AccountNotFound({ accountId })
        const removed = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(hashtext('crm-relay.connections'), hashtext(${`${accountId}/${tenantId}`}))`
          const rows = yield* sql<{ secret_id: string }>`
            DELETE FROM connections WHERE account_id = ${accountId} AND tenant_id = ${tenantId} RETURNING secret_id`
          for (const row of rows) {
            yield* sql`DELETE FROM vault_secrets AS v WHERE v.id = ${row.secret_id}
                       AND NOT EXISTS (SELECT 1 FROM connections AS c WHERE c.secret_id = v.id)`
          }
          return rows.length > 0
        })).pipe(Effect.orDie)
        if (!removed) return yield* new ConnectionNotFound({ accountId, tenantId })
        yield* clients.forget(accountId, tenantId)
        yield* Effect.logInfo("Bridge connection removed").pipe(Effect.annotateLogs({ account_id: accountId, tenant_id: tenantId }))
        yield* Audit.record("connection.removed", { account_id: accountId, tenant_id: tenantId })
      }),

      /**
       * The connection of an account's tenant, decrypted and ready for
       * `BridgeClients.forConnection`, with its stored capabilities; none
       * when there is none, or when the account is not live (demo and
       * sandbox never reach a real CRM) or does not exist.
       */
      find: Effect.fn("Connections.find")(function*(accountId: string, tenantId: string) {
        const found = yield* state(accountId, tenantId)
        return Option.flatMap(found, (s) => (s.mode === "live" ? s.connection : Option.none()))
      }),

      /** The account's mode and the tenant's connection; none when the account does not exist. */
      state: (accountId: string, tenantId: string) => state(accountId, tenantId).pipe(Effect.withSpan("Connections.state")),

      /**
       * Connects a tenant: runs the capabilities check with `settings` (and
       * nothing else), then stores the connection and the capabilities.
       * Stores nothing when the account may not connect or the check fails.
       */
      set: Effect.fn("Connections.set")(function*(accountId: string, tenantId: string, settings: ConnectionSettings) {
        if (tenantId.length > 200) {
          return yield* new InvalidConnection({ field: "tenant", message: "The tenant ID must be at most 200 characters." })
        }
        const current = yield* liveAccount(accountId, tenantId)
        const version = (current.version ?? 0) + 1
        const connectionId = randomUUID()
        const connection: Connection.Connection = {
          accountId,
          tenantId,
          version,
          transport: { kind: settings.transport, url: settings.url },
          auth: settings.auth
        }
        const capabilities = yield* check(connection)
        const stored = yield* save(settings, connection, connectionId, capabilities)
        yield* clients.forget(accountId, tenantId)
        yield* Effect.logInfo("Bridge connection stored").pipe(
          Effect.annotateLogs({
            account_id: accountId,
            tenant_id: tenantId,
            transport: settings.transport,
            url: loggable(settings.url),
            auth_type: settings.auth.type,
            version: stored
          })
        )
        yield* Audit.record("connection.set", { account_id: accountId, tenant_id: tenantId, transport: settings.transport, version: stored })
        return capabilities
      }),

      /**
       * The connection form's "Test connection": the capabilities check with
       * `settings` (and nothing else), for an account that may connect; stores
       * nothing, whatever the outcome (saving is `set`, which checks again).
       */
      probe: Effect.fn("Connections.probe")(function*(accountId: string, tenantId: string, settings: ConnectionSettings) {
        if (tenantId.length === 0 || tenantId.length > 200) {
          return yield* new InvalidConnection({ field: "tenant", message: "The tenant ID must be 1 to 200 characters." })
        }
        const current = yield* liveAccount(accountId, tenantId)
        return yield* check({
          accountId,
          tenantId,
          version: (current.version ?? 0) + 1,
          transport: { kind: settings.transport, url: settings.url },
          auth: settings.auth
        })
      }),

      /**
       * Runs the capabilities check again on the stored connection and, when
       * it passes, stores the new capabilities (the configuration is unchanged).
       */
      test: Effect.fn("Connections.test")(function*(accountId: string, tenantId: string) {
        const current = yield* stored(accountId, tenantId, yield* liveAccount(accountId, tenantId))
        if (Option.isNone(current)) return yield* new ConnectionNotFound({ accountId, tenantId })
        const { connection } = current.value
        const capabilities = yield* check(connection)
        yield* sql`
          UPDATE connections SET capabilities = ${JSON.stringify(encodeCapabilities(capabilities))}::jsonb, checked_at = now()
          WHERE account_id = ${accountId} AND tenant_id = ${tenantId} AND version = ${connection.version}`.pipe(Effect.orDie)
        yield* Effect.logInfo("Bridge connection checked").pipe(
          Effect.annotateLogs({ account_id: accountId, tenant_id: tenantId, version: connection.version })
        )
        return capabilities
      })
    }
  })
}) {}
