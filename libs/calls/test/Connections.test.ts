import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Operations } from "@crm-relay/contract"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Audit } from "@crm-relay/store"
import { Effect, Exit, HashMap, Logger, Option, Redacted } from "effect"
import { Connections } from "../src/Connections.js"
import * as Harness from "./ConnectionsHarness.js"

const ALL_OPERATIONS = {
  contract_version: "svc.crm.v1",
  operations: [...Operations.OPERATIONS],
  booking_closes_availability: true
}

/** The stored rows of a tenant's connection, every column as text (to look for secrets). */
const storedText = (accountId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Record<string, unknown>>`
      SELECT c.*, v.aad, encode(v.ciphertext, 'escape') AS ciphertext FROM connections c
      JOIN vault_secrets v ON v.id = c.secret_id WHERE c.account_id = ${accountId}`).pipe(Effect.map((rows) => JSON.stringify(rows)))

const connectionCount = (accountId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT count(*)::int4 AS n FROM connections WHERE account_id = ${accountId}`).pipe(
      Effect.map((rows) => rows[0]!.n)
    )

const errorOf = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

layer(Harness.ConnectionsLive)("Connections", (it) => {
  for (const spec of Harness.MATRIX) {
    describe(`${spec.transport} transport × ${spec.auth}`, () => {
      it.effect("What the service does: connecting runs the capabilities check only — one capabilities request, nothing written at the bridge; the connection and its capabilities are stored", () =>
        Effect.gen(function*() {
          yield* Harness.resetBridge
          const bridge = yield* ReferenceBridge.ReferenceBridge
          const connections = yield* Connections
          const { id } = yield* Harness.account("live")
          const capabilities = yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, spec))
          expect(capabilities).toEqual(ALL_OPERATIONS)

          const received = yield* Harness.bridgeRequests
          expect(received.map((r) => [r.transport, r.operation, r.tenantId, r.idempotencyKey])).toEqual([
            [spec.transport, "capabilities", Harness.TENANT.tenantId, undefined]
          ])
          const records = yield* bridge.control.records
          expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])

          const found = yield* connections.find(id, Harness.TENANT.tenantId)
          expect(Option.isSome(found)).toBe(true)
          const stored = Option.getOrThrow(found)
          expect(stored.capabilities).toEqual(ALL_OPERATIONS)
          expect(stored.connection).toMatchObject({
            accountId: id,
            tenantId: Harness.TENANT.tenantId,
            version: 1,
            transport: { kind: spec.transport, url: spec.transport === "rest" ? bridge.restBaseUrl : bridge.mcpUrl }
          })
          const auth = stored.connection.auth
          expect(Redacted.value(auth.type === "api_key" ? auth.key : auth.clientSecret)).toBe(
            spec.auth === "api_key" ? Harness.TENANT.apiKey : Harness.TENANT.clientSecret
          )
          if (auth.type === "oauth") {
            expect([auth.tokenUrl, auth.clientId, auth.scope]).toEqual([bridge.tokenUrl, Harness.TENANT.clientId, undefined])
          }
          // Authentication rule 5: the credential is stored encrypted — never in the clear.
          const text = yield* storedText(id)
          expect(text).not.toContain(spec.auth === "api_key" ? Harness.TENANT.apiKey : Harness.TENANT.clientSecret)
        }))
    })
  }

  it.effect("Demo and sandbox accounts cannot connect this bridge to a real CRM: refused, no bridge traffic, nothing stored", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      for (const mode of ["demo", "sandbox"] as const) {
        const { id } = yield* Harness.account(mode)
        const error = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" })))
        expect(error._tag).toBe("ConnectionNotAllowed")
        expect(error.message).toBe(`Demo and sandbox accounts cannot connect a bridge to a real CRM; this account's mode is ${mode}.`)
        expect((yield* errorOf(connections.test(id, Harness.TENANT.tenantId)))._tag).toBe("ConnectionNotAllowed")
        expect(yield* connectionCount(id)).toBe(0)
      }
      expect(yield* bridge.control.received).toEqual([])
    }))

  it.effect("Authentication rule 1 and Transport rules: a bad URL or credential is refused before anything is sent, naming the connection-form field", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      const good = Harness.settings(bridge, { transport: "rest", auth: "api_key" })
      const oauth = Harness.settings(bridge, { transport: "rest", auth: "oauth" })
      const cases: ReadonlyArray<readonly [string, typeof good]> = [
        ["url", { ...good, url: bridge.restBaseUrl.replace("https:", "http:") }],
        ["url", { ...good, url: `${bridge.restBaseUrl}?tenant=1` }],
        ["url", { ...good, url: "not a url" }],
        ["url", { ...good, url: bridge.restBaseUrl.replace("https://", "https://user:pw@") }],
        ["transport", { ...good, transport: "grpc" }],
        ["auth.key", { ...good, auth: { type: "api_key", key: Redacted.make("has a space") } }],
        ["auth.key", { ...good, auth: { type: "api_key", key: Redacted.make("") } }],
        ["auth.token_url", { ...oauth, auth: { type: "oauth", tokenUrl: "http://bridge.localhost/token", clientId: "c", clientSecret: Redacted.make("s") } }],
        ["auth.client_id", { ...oauth, auth: { type: "oauth", tokenUrl: bridge.tokenUrl, clientId: "", clientSecret: Redacted.make("s") } }],
        ["auth.client_secret", { ...oauth, auth: { type: "oauth", tokenUrl: bridge.tokenUrl, clientId: "c", clientSecret: Redacted.make("") } }],
        ["auth.scope", { ...oauth, auth: { type: "oauth", tokenUrl: bridge.tokenUrl, clientId: "c", clientSecret: Redacted.make("s"), scope: "bad\u0001scope" } }]
      ]
      for (const [field, settings] of cases) {
        const error = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, settings))
        expect(error._tag).toBe("InvalidConnection")
        expect(error._tag === "InvalidConnection" && error.field).toBe(field)
      }
      const longTenant = yield* errorOf(connections.set(id, "t".repeat(201), good))
      expect(longTenant._tag === "InvalidConnection" && longTenant.field).toBe("tenant")
      const emptyTenant = yield* errorOf(connections.set(id, "", good))
      expect(emptyTenant._tag === "InvalidConnection" && emptyTenant.field).toBe("tenant")
      expect(yield* bridge.control.received).toEqual([])
      expect(yield* connectionCount(id)).toBe(0)
    }))

  it.effect("a failed check stores nothing: an unreachable bridge is `unreachable`; a refused key, egress refusal or invalid capabilities is `refused`", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      const good = Harness.settings(bridge, { transport: "rest", auth: "api_key" })

      // Nothing listens on port 1 of the bridge host.
      const unreachable = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, { ...good, url: `https://${Harness.HOST}:1/crm` }))
      expect(unreachable._tag === "CheckFailed" && [unreachable.reason, unreachable.failure]).toEqual(["unreachable", "Transient"])

      yield* bridge.control.setFault(Faults.status(503), { operation: "capabilities" })
      const down = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, good))
      expect(down._tag === "CheckFailed" && [down.reason, down.status]).toEqual(["unreachable", 503])

      const wrongKey = yield* errorOf(
        connections.set(id, Harness.TENANT.tenantId, { ...good, auth: { type: "api_key", key: Redacted.make("wrong-key") } })
      )
      expect(wrongKey._tag === "CheckFailed" && [wrongKey.reason, wrongKey.failure, wrongKey.status]).toEqual(["refused", "Auth", 401])
      // Authentication rule 4: another tenant's credential does not authenticate this tenant.
      const foreign = yield* errorOf(
        connections.set(id, Harness.TENANT.tenantId, { ...good, auth: { type: "api_key", key: Redacted.make(Harness.OTHER.apiKey) } })
      )
      expect(foreign._tag === "CheckFailed" && foreign.failure).toBe("Auth")

      // A host that resolves to a private address is never reached (safe egress).
      const privateHost = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, { ...good, url: "https://10.0.0.1/crm" }))
      expect(privateHost._tag === "CheckFailed" && [privateHost.reason, privateHost.failure]).toEqual(["refused", "Permanent"])

      yield* bridge.control.setFault(Faults.invalidReceipt("capabilities_without_upsert"), { operation: "capabilities" })
      const invalid = yield* errorOf(connections.set(id, Harness.TENANT.tenantId, good))
      expect(invalid._tag === "CheckFailed" && [invalid.reason, invalid.failure]).toEqual(["refused", "Permanent"])
      expect(invalid.message).toContain("The capabilities check did not pass")

      expect(yield* connectionCount(id)).toBe(0)
      const records = yield* bridge.control.records
      expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])
    }))

  it.effect("a failed check keeps the previous connection as it was", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" }))
      const before = Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId))
      yield* errorOf(connections.set(id, Harness.TENANT.tenantId, {
        ...Harness.settings(bridge, { transport: "mcp", auth: "api_key" }),
        auth: { type: "api_key", key: Redacted.make("wrong-key") }
      }))
      const after = Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId))
      expect(after.connection.version).toBe(before.connection.version)
      expect(after.connection.transport).toEqual(before.connection.transport)
    }))

  it.effect("every change gets a higher version and a new sealed secret; the replaced secret is deleted", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const sql = yield* SqlClient.SqlClient
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" }))
      const [first] = yield* sql<{ id: string; secret_id: string }>`SELECT id, secret_id FROM connections WHERE account_id = ${id}`
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "mcp", auth: "oauth" }))
      const [second] = yield* sql<{ id: string; secret_id: string; version: number }>`
        SELECT id, secret_id, version FROM connections WHERE account_id = ${id}`
      expect(second!.version).toBe(2)
      expect(second!.id).not.toBe(first!.id)
      expect(yield* sql`SELECT id FROM vault_secrets WHERE id = ${first!.secret_id}`).toEqual([])
      const found = Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId))
      expect([found.connection.version, found.connection.transport.kind, found.connection.auth.type]).toEqual([2, "mcp", "oauth"])
    }))

  it.effect("removing a connection deletes its sealed secret and writes one audit line naming who removed it", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const sql = yield* SqlClient.SqlClient
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" }))
      const [stored] = yield* sql<{ secret_id: string }>`SELECT secret_id FROM connections WHERE account_id = ${id}`

      const audit: Array<Record<string, unknown>> = []
      const collect = Logger.make(({ annotations }) => {
        const line = Object.fromEntries(HashMap.toEntries(annotations))
        if (line["log"] === "audit") audit.push(line)
      })
      yield* connections.remove(id, Harness.TENANT.tenantId).pipe(
        Audit.actingAs({ actor: "admin_token", accountId: id }),
        Effect.provide(Logger.replace(Logger.defaultLogger, collect))
      )
      expect(yield* connectionCount(id)).toBe(0)
      expect(yield* sql`SELECT id FROM vault_secrets WHERE id = ${stored!.secret_id}`).toEqual([])
      expect(audit).toEqual([
        { log: "audit", action: "connection.removed", actor: "admin_token", account_id: id, tenant_id: Harness.TENANT.tenantId }
      ])
    }))

  it.effect("connections test re-runs the capabilities check on the stored connection and stores what it answers", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const sql = yield* SqlClient.SqlClient
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      const missing = yield* errorOf(connections.test(id, Harness.TENANT.tenantId))
      expect(missing._tag).toBe("ConnectionNotFound")
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "mcp", auth: "api_key" }))
      // As if the bridge had advertised less when it was connected.
      yield* sql`UPDATE connections SET capabilities = ${JSON.stringify({ ...ALL_OPERATIONS, operations: ["capabilities", "contacts.upsert", "leads.create"] })}::jsonb
                 WHERE account_id = ${id}`
      expect(Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId)).capabilities.operations).toHaveLength(3)
      yield* bridge.control.reset
      expect(yield* connections.test(id, Harness.TENANT.tenantId)).toEqual(ALL_OPERATIONS)
      expect(Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId)).capabilities).toEqual(ALL_OPERATIONS)
      expect((yield* Harness.bridgeRequests).map((r) => r.operation)).toEqual(["capabilities"])
      // A failing test leaves the stored capabilities alone.
      yield* bridge.control.setFault(Faults.status(500), { operation: "capabilities" })
      expect((yield* errorOf(connections.test(id, Harness.TENANT.tenantId)))._tag).toBe("CheckFailed")
      expect(Option.getOrThrow(yield* connections.find(id, Harness.TENANT.tenantId)).capabilities).toEqual(ALL_OPERATIONS)
    }))

  it.effect("find: none for an unknown account or tenant, and none once the account is not live (demo and sandbox never reach a real CRM)", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const sql = yield* SqlClient.SqlClient
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      expect(yield* connections.find("not-a-uuid", "t-1")).toEqual(Option.none())
      expect(yield* connections.find("0f8fad5b-d9cb-469f-a165-70867728950e", "t-1")).toEqual(Option.none())
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" }))
      expect(yield* connections.find(id, "t-unknown")).toEqual(Option.none())
      yield* sql`UPDATE accounts SET mode = 'sandbox' WHERE id = ${id}`
      expect(yield* connections.find(id, Harness.TENANT.tenantId)).toEqual(Option.none())
      const state = yield* connections.state(id, Harness.TENANT.tenantId)
      expect(Option.map(state, (s) => [s.mode, Option.isSome(s.connection)])).toEqual(Option.some(["sandbox", true]))
    }))

  it.effect("Authentication rule 5: a credential moved to another tenant's connection does not decrypt there (and the connection can be set again)", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const sql = yield* SqlClient.SqlClient
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "api_key" }))
      const other = yield* Harness.account("live")
      yield* connections.set(other.id, Harness.OTHER.tenantId, {
        ...Harness.settings(bridge, { transport: "rest", auth: "api_key" }),
        auth: { type: "api_key", key: Redacted.make(Harness.OTHER.apiKey) }
      })
      // Point the other tenant's connection at t-1's sealed key.
      yield* sql`UPDATE connections SET secret_id = (SELECT secret_id FROM connections WHERE account_id = ${id})
                 WHERE account_id = ${other.id}`
      const exit = yield* Effect.exit(connections.find(other.id, Harness.OTHER.tenantId))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(exit)).not.toContain(Harness.TENANT.apiKey)
      expect(Option.isSome(yield* connections.find(id, Harness.TENANT.tenantId))).toBe(true)
      // The operator can still set the broken connection again (nothing needs to open the old secret).
      yield* connections.set(other.id, Harness.OTHER.tenantId, {
        ...Harness.settings(bridge, { transport: "rest", auth: "api_key" }),
        auth: { type: "api_key", key: Redacted.make(Harness.OTHER.apiKey) }
      })
      const repaired = Option.getOrThrow(yield* connections.find(other.id, Harness.OTHER.tenantId))
      expect(repaired.connection.auth.type === "api_key" && Redacted.value(repaired.connection.auth.key)).toBe(Harness.OTHER.apiKey)
      expect(Option.isSome(yield* connections.find(id, Harness.TENANT.tenantId))).toBe(true)
    }))

  it.effect("secrets never appear in logs or errors: setting, testing and failing checks log neither the API key nor the client secret", () =>
    Effect.gen(function*() {
      yield* Harness.resetBridge
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const connections = yield* Connections
      const { id } = yield* Harness.account("live")
      const { exit, lines } = yield* Harness.captureLogs(Effect.gen(function*() {
        const errors: Array<unknown> = []
        yield* connections.set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport: "rest", auth: "oauth" }))
        yield* connections.test(id, Harness.TENANT.tenantId)
        errors.push(yield* errorOf(connections.set(id, Harness.TENANT.tenantId, {
          ...Harness.settings(bridge, { transport: "rest", auth: "api_key" }),
          auth: { type: "api_key", key: Redacted.make("wrong key with spaces") }
        })))
        errors.push(yield* errorOf(connections.set(id, Harness.TENANT.tenantId, {
          ...Harness.settings(bridge, { transport: "rest", auth: "oauth" }),
          auth: { type: "oauth", tokenUrl: bridge.tokenUrl, clientId: Harness.TENANT.clientId, clientSecret: Redacted.make("wrong-client-secret") }
        })))
        errors.push(yield* errorOf(connections.set(id, Harness.TENANT.tenantId, {
          ...Harness.settings(bridge, { transport: "rest", auth: "api_key" }),
          url: bridge.restBaseUrl.replace("https://", "https://user:url-password-9@")
        })))
        yield* Effect.logError("errors", errors)
        return errors
      }))
      expect(lines.some((l) => l.includes("Bridge connection stored"))).toBe(true)
      const everything = [...lines, JSON.stringify(Exit.isSuccess(exit) ? exit.value : exit), String(exit)].join("\n")
      expect(lines.some((l) => l.includes("Bridge connection check did not pass"))).toBe(true)
      for (const secret of [Harness.TENANT.clientSecret, "wrong key with spaces", "wrong-client-secret", "url-password-9"]) {
        expect(everything).not.toContain(secret)
      }
    }))
})
