/**
 * Issue 41, "Through PgBouncer": "The server, its workers, split roles and
 * every command work with `DATABASE_URL` pointing at PgBouncer in
 * transaction mode." Here the migrations, intake, CRM push and delivery
 * paths, with real `crm-relay` processes, a private PgBouncer in transaction
 * mode in front of the real PostgreSQL, the reference bridge and an HTTPS
 * receiver on loopback. DATABASE_SESSION_URL names the direct connection
 * for whatever needs a session (LISTEN).
 *
 * PostgreSQL only (vitest.config.ts runs this file only when DATABASE_URL is set).
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { Vault } from "@crm-relay/store"
import { Effect, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Webhook } from "standardwebhooks"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { eventually, loopbackTls, receiver } from "./support/Pipeline.js"
import { PooledDatabase, layer as pooledLayer } from "./support/PooledDatabase.js"
import { tempDir } from "./support/TempDir.js"
import { ADMIN_TOKEN, adminRequest, request } from "./support/TestServer.js"

type Json = Record<string, any>

const TENANT = { tenantId: "t-pooled", apiKey: "key-pooled-test" }

describe("through PgBouncer in transaction mode (#41)", () => {
  layer(pooledLayer, { excludeTestServices: true, timeout: PROCESS_TEST_TIMEOUT })((it) => {
    it.effect("#41: \"every command works with DATABASE_URL pointing at PgBouncer in transaction mode\": two `migrate` at once migrate an empty schema through the pooler, once", () =>
      Effect.gen(function*() {
        const pooled = yield* PooledDatabase
        const sql = yield* SqlClient.SqlClient
        const tables = sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = ${pooled.schema}`
        expect((yield* tables)[0]!.n).toBe(0)
        const dir = yield* tempDir("crm-relay-pooled-migrate-")
        const env = { DATA_DIR: Path.join(dir, "data"), DATABASE_URL: pooled.pooledUrl, DATABASE_SESSION_URL: pooled.directUrl, LOG_LEVEL: "Warning" }
        // Two at once: the migrations' lock is transaction-scoped, so it holds through a transaction pooler.
        const [first, second] = yield* Effect.all([cli(["migrate", "--json"], env), cli(["migrate", "--json"], env)], { concurrency: 2 })
        expect(first!.code, first!.stderr).toBe(0)
        expect(second!.code, second!.stderr).toBe(0)
        const applied = [...JSON.parse(first!.stdout).applied, ...JSON.parse(second!.stdout).applied].map((m: Json) => m["id"])
        const recorded = yield* sql<{ id: number }>`SELECT id FROM ${sql(pooled.schema)}.crm_relay_migrations ORDER BY id`
        // Each migration applied once, by one of the two, in the test's schema (not in `public`).
        expect(applied.sort((a, b) => a - b)).toEqual(recorded.map((r) => r.id))
        expect(recorded.length).toBeGreaterThan(0)
        const status = yield* cli(["migrate", "--status", "--json"], env)
        expect(status.code, status.stderr).toBe(0)
        expect(JSON.parse(status.stdout)).toMatchObject({ pending: [] })
      }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)

    it.effect("#41: \"the server, its workers ... work with DATABASE_URL pointing at PgBouncer\": an outcome is accepted, pushed to the CRM once and delivered once, signed", () =>
      Effect.gen(function*() {
        const pooled = yield* PooledDatabase
        const dir = yield* tempDir("crm-relay-pooled-pipeline-")
        const tls = yield* loopbackTls
        const bridge = yield* ReferenceBridge.make({ tenants: [TENANT], tls }).pipe(Effect.orDie)
        const hooks = yield* receiver(tls, "127.0.0.1")
        const caFile = Path.join(dir, "ca.pem")
        Fs.writeFileSync(caFile, tls.ca)
        const dataDir = Path.join(dir, "data")
        const env: Record<string, string> = {
          DATA_DIR: dataDir,
          ADMIN_TOKEN,
          MASTER_KEY: Redacted.value(Vault.generateMasterKey()),
          EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
          NODE_EXTRA_CA_CERTS: caFile,
          LOG_LEVEL: "Warning",
          DATABASE_URL: pooled.pooledUrl,
          DATABASE_SESSION_URL: pooled.directUrl
        }
        const server = yield* serve(env)
        const info = Option.getOrThrow(
          yield* eventually(ServerFile.running(dataDir), (i) => Option.isSome(i) && i.value.pid === server.pid, SERVE_START_BOUND)
        )
        const account = (yield* adminRequest(info.adminUrl, "POST", "/v1/accounts", { name: "Pooled", mode: "live" })).json as Json
        const connected = yield* adminRequest(info.adminUrl, "PUT", `/v1/accounts/${account["id"]}/connections/${TENANT.tenantId}`, {
          transport: "rest",
          url: bridge.restBaseUrl,
          auth: { type: "api_key", key: TENANT.apiKey }
        })
        expect(connected.status).toBe(200)
        const key = ((yield* adminRequest(info.adminUrl, "POST", `/v1/accounts/${account["id"]}/keys`)).json as Json)["key"] as string
        const subscribed = yield* request("POST", `${info.publicUrl}/subscribe`, {
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ targetUrl: hooks.url("/pooled"), event: "lead" })
        })
        expect(subscribed.status).toBe(201)
        const secret = ((yield* adminRequest(info.adminUrl, "GET", `/v1/accounts/${account["id"]}/signing-secret`)).json as Json)["secret"] as string

        const callId = `call-${randomUUID()}`
        const accepted = yield* adminRequest(info.adminUrl, "POST", `/v1/calls/${callId}/outcome`, {
          account_id: account["id"],
          tenant_id: TENANT.tenantId,
          classification: "lead",
          source: "Pooled test (phone)",
          tags: [],
          caller: { full_name: "Grace Hopper", first_name: "Grace", last_name: "Hopper", phones: ["+44 20 7946 0002"], emails: [], address: "" },
          lead: { job_type: "Survey", summary: "Needs a survey", notes: "", urgency: "" }
        })
        expect(accepted.status).toBe(202)
        const push = yield* eventually(
          Effect.map(adminRequest(info.adminUrl, "GET", `/v1/calls/${callId}/outcome`), (a) => ((a.json as Json)["push"] ?? {}) as Json),
          (p) => p["status"] === "succeeded"
        )
        expect(push["receipts"].map((r: Json) => r["operation"])).toEqual(["contacts.upsert", "leads.create"])
        expect(push["attempts"]).toBe(1)
        const records = yield* bridge.control.records
        expect(records.contacts.filter((c) => c.contact.call_id === callId)).toHaveLength(1)
        expect(records.leads.filter((l) => l.lead.call_id === callId)).toHaveLength(1)

        const events = yield* eventually(Effect.sync(() => hooks.received().filter((d) => d.path === "/pooled")), (d) => d.length >= 1)
        expect(new Webhook(secret).verify(events[0]!.body, events[0]!.headers)).toMatchObject({ event: "lead", call_id: callId })
        // The delivery is recorded done: nothing is sent again.
        yield* eventually(
          Effect.map(cli(["deliveries", "list", "--status", "delivered", "--json"], env), (run) => run.stdout),
          (out) => out.includes(callId)
        )
        expect(hooks.received().filter((d) => d.path === "/pooled")).toHaveLength(1)
        // An operator command through the pooler, beside the running server.
        const listed = yield* cli(["pushes", "list", "--status", "succeeded", "--json"], env)
        expect(listed.code, listed.stderr).toBe(0)
        expect(JSON.parse(listed.stdout).pushes).toMatchObject([{ id: push["id"], call_id: callId, status: "succeeded", attempts: 1 }])
        expect(yield* server.terminate).toBe(0)
      }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)
  })
})
