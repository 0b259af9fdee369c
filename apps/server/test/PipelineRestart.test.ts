/**
 * Crash safety of the CRM push, with the real `crm-relay serve` binary as a
 * child process: SIGKILL it while a push job is in the middle of
 * leads.create (the bridge is made slow), start it again on the same
 * database (PostgreSQL: the test schema's URL; PGlite: the same DATA_DIR),
 * and everything completes once, with the same idempotency keys: the bridge
 * holds one contact and one lead, and the receiver gets one lead event.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Clock, Duration, Effect, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Webhook } from "standardwebhooks"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { eventually, loopbackTls, receiver } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { ADMIN_TOKEN, adminRequest, request } from "./support/TestServer.js"

type Json = Record<string, any>

const TENANT = { tenantId: "t-crash", apiKey: "key-crash-test" }

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("call pipeline: a worker killed mid-job", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })((it) => {
    it.effect("SIGKILL during leads.create → after a restart the push completes once: one contact, one lead, one event, same keys", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase.TestDatabase
        const dir = yield* tempDir("crm-relay-pipeline-")
        // The bridge answers on 127.0.0.1 (certificate for that address), in this process: it outlives the restarts.
        const tls = yield* loopbackTls
        const bridge = yield* ReferenceBridge.make({ tenants: [TENANT], tls }).pipe(Effect.orDie)
        const hooks = yield* receiver(tls, "127.0.0.1")
        const caFile = Path.join(dir, "ca.pem")
        Fs.writeFileSync(caFile, tls.ca)
        const dataDir = Path.join(dir, "data")
        const env: Record<string, string> = {
          DATA_DIR: dataDir,
          PORT: "0",
          ADMIN_PORT: "0",
          ADMIN_TOKEN,
          MASTER_KEY: Redacted.value(Vault.generateMasterKey()),
          EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
          NODE_EXTRA_CA_CERTS: caFile,
          LOG_LEVEL: "Warning"
        }
        if (Option.isSome(db.url)) env["DATABASE_URL"] = Redacted.value(db.url.value)

        const adminOf = (pid: number) =>
          Effect.map(
            eventually(ServerFile.running(dataDir), (info) => Option.isSome(info) && info.value.pid === pid, SERVE_START_BOUND),
            (info) => Option.getOrThrow(info).adminUrl
          )

        const first = yield* serve(env)
        const admin1 = yield* adminOf(first.pid)
        const account = (yield* adminRequest(admin1, "POST", "/v1/accounts", { name: "Crash test", mode: "live" })).json as Json
        const connected = yield* adminRequest(admin1, "PUT", `/v1/accounts/${account["id"]}/connections/${TENANT.tenantId}`, {
          transport: "rest",
          url: bridge.restBaseUrl,
          auth: { type: "api_key", key: TENANT.apiKey }
        })
        expect(connected.status).toBe(200)
        const key = ((yield* adminRequest(admin1, "POST", `/v1/accounts/${account["id"]}/keys`)).json as Json)["key"] as string
        const publicUrl = Option.getOrThrow(yield* ServerFile.running(dataDir)).publicUrl
        const subscribed = yield* request("POST", `${publicUrl}/subscribe`, {
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ targetUrl: hooks.url("/crash"), event: "lead" })
        })
        expect(subscribed.status).toBe(201)
        const secret = ((yield* adminRequest(admin1, "GET", `/v1/accounts/${account["id"]}/signing-secret`)).json as Json)["secret"] as string

        // leads.create is held the first time (longer than the egress's 10 s deadline): the kill lands while it is in flight.
        yield* bridge.control.setFault(Faults.delay(120_000), { operation: "leads.create" })
        const callId = `call-${randomUUID()}`
        const accepted = yield* adminRequest(admin1, "POST", `/v1/calls/${callId}/outcome`, {
          account_id: account["id"],
          tenant_id: TENANT.tenantId,
          classification: "lead",
          source: "Crash test (phone)",
          tags: [],
          caller: { full_name: "Alan Turing", first_name: "Alan", last_name: "Turing", phones: ["+44 20 7946 0000"], emails: [], address: "" },
          lead: { job_type: "Survey", summary: "Needs a survey", notes: "", urgency: "" }
        })
        expect(accepted.status).toBe(202)
        // The upsert's receipt is stored, and leads.create reached the bridge (its delay is taken): it is in flight.
        yield* eventually(
          Effect.map(adminRequest(admin1, "GET", `/v1/calls/${callId}/outcome`), (a) => ((a.json as Json)["push"] ?? {}) as Json),
          (p) => (p["receipts"] ?? []).length === 1
        )
        yield* eventually(bridge.control.pendingFaults, (pending) => pending.length === 0)
        process.kill(first.pid, "SIGKILL")
        yield* eventually(Effect.sync(() => alive(first.pid)), (a) => !a)
        const killedAt = yield* Clock.currentTimeMillis

        const second = yield* serve(env)
        const admin2 = yield* adminOf(second.pid)
        const push = yield* eventually(
          Effect.map(adminRequest(admin2, "GET", `/v1/calls/${callId}/outcome`), (a) => ((a.json as Json)["push"] ?? {}) as Json),
          (p) => p["status"] === "succeeded",
          // On PostgreSQL the killed worker's 30 s lease has to expire first.
          Duration.minutes(3)
        )
        const recoveredIn = (yield* Clock.currentTimeMillis) - killedAt
        expect(push["receipts"].map((r: Json) => r["operation"])).toEqual(["contacts.upsert", "leads.create"])

        const records = yield* bridge.control.records
        expect(records.contacts.filter((c) => c.contact.call_id === callId)).toHaveLength(1)
        expect(records.leads.filter((l) => l.lead.call_id === callId)).toHaveLength(1)
        // Claimed twice: by the killed worker, and again after the restart (the lease taken back or expired).
        expect(push["attempts"]).toBe(2)
        // Whatever reached the bridge (the killed worker's request may be logged as interrupted, or not at all) carried one key.
        const leadsSent = (yield* bridge.control.received).filter((r) => r.operation === "leads.create")
        expect(leadsSent.length).toBeGreaterThanOrEqual(1)
        expect(new Set(leadsSent.map((r) => r.idempotencyKey)).size).toBe(1)
        expect(leadsSent[0]!.idempotencyKey).toBe(push["receipts"][1]["idempotency_key"])

        const events = yield* eventually(Effect.sync(() => hooks.received().filter((d) => d.path === "/crash")), (d) => d.length >= 1)
        yield* Effect.sleep(Duration.millis(500))
        expect(hooks.received().filter((d) => d.path === "/crash")).toHaveLength(1)
        expect(new Webhook(secret).verify(events[0]!.body, events[0]!.headers)).toMatchObject({ event: "lead", call_id: callId })
        // The operator's view of it, through the running server: `crm-relay pushes list`.
        const listed = yield* cli(["pushes", "list", "--status", "succeeded", "--json"], env)
        expect(listed.code, listed.stderr).toBe(0)
        expect(JSON.parse(listed.stdout).pushes).toMatchObject([{ id: push["id"], call_id: callId, status: "succeeded", attempts: 2 }])
        yield* Effect.logInfo("Recovered after SIGKILL").pipe(Effect.annotateLogs({ recovered_ms: recoveredIn, database: db.kind }))
        expect(yield* second.terminate).toBe(0)
      }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)
  })
})
