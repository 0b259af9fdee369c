/**
 * Issue 35, with the real `crm-relay serve` binary as a child process: an
 * outcome fanned out to 1 000 subscriptions, the worker SIGKILLed during
 * the fan-out, started again on the same database; "at-least-once, one
 * `webhook-id` per (event, subscription) across retries and crashes".
 *
 * On PostgreSQL the kill lands mid-fan-out by construction, with no hook in
 * the product: the test (its schema its own) puts a trigger on `deliveries`
 * that makes the 700th subscription's insert wait on an advisory lock the
 * test holds, so the fan-out's second batch waits there after the first 500
 * deliveries are committed; the server is killed while it waits, its
 * connections end as a dead host's would, the lock is let go and the
 * trigger dropped. On the embedded database (this process cannot open it
 * while the server runs) the kill lands as the first deliveries arrive.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Deferred, Duration, Effect, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Webhook } from "standardwebhooks"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { eventually, loopbackTls, receiver } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { ADMIN_TOKEN, adminRequest, request } from "./support/TestServer.js"

type Json = Record<string, any>

const SUBSCRIPTIONS = 1000
/** Subscriptions per integration key: under the contract's 60 requests a minute per key. */
const PER_KEY = 50

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("fan-out: a worker killed mid-fan-out (#35)", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })((it) => {
    it.effect("#35: SIGKILL during a fan-out of 1 000 → after a restart every subscription gets exactly one delivery id, every delivery arrives at least once, no pair under two ids", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase.TestDatabase
        const sql = yield* SqlClient.SqlClient
        const dir = yield* tempDir("crm-relay-fanout-")
        const tls = yield* loopbackTls
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
          MAX_SUBSCRIPTIONS_PER_ACCOUNT: String(2 * SUBSCRIPTIONS),
          LOG_LEVEL: "Warning"
        }
        if (Option.isSome(db.url)) env["DATABASE_URL"] = Redacted.value(db.url.value)
        const urlsOf = (pid: number) =>
          Effect.map(
            eventually(ServerFile.running(dataDir), (info) => Option.isSome(info) && info.value.pid === pid, SERVE_START_BOUND),
            (info) => Option.getOrThrow(info)
          )

        const first = yield* serve(env)
        const { adminUrl, publicUrl } = yield* urlsOf(first.pid)
        const account = (yield* adminRequest(adminUrl, "POST", "/v1/accounts", { name: "Fan-out crash", mode: "live" })).json as Json
        const secret = ((yield* adminRequest(adminUrl, "GET", `/v1/accounts/${account["id"]}/signing-secret`)).json as Json)["secret"] as string
        // 1 000 subscriptions through the public API, each to a path of its own.
        for (let k = 0; k < SUBSCRIPTIONS / PER_KEY; k++) {
          const key = ((yield* adminRequest(adminUrl, "POST", `/v1/accounts/${account["id"]}/keys`)).json as Json)["key"] as string
          yield* Effect.forEach(Array.from({ length: PER_KEY }, (_, i) => k * PER_KEY + i), (n) =>
            Effect.map(request("POST", `${publicUrl}/subscribe`, {
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({ targetUrl: hooks.url(`/hook/${n}`), event: "lead" })
            }), (answer) => expect(answer.status).toBe(201)), { concurrency: 8 })
        }

        // PostgreSQL: the 700th subscription's delivery waits on the test's lock, so the fan-out stops after its
        // first batch of 500. The lock's key is this schema's: suites sharing the database never meet it.
        const release = yield* Deferred.make<void>()
        const holding = yield* Deferred.make<number>()
        if (db.kind === "postgres") {
          const [held] = yield* sql<{ id: string }>`SELECT id FROM subscriptions WHERE account_id = ${account["id"]} ORDER BY seq OFFSET 699 LIMIT 1`
          yield* sql`CREATE FUNCTION fanout_crash_hold() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              PERFORM pg_advisory_xact_lock_shared(hashtext('crm-relay.fanout-crash'), hashtext(current_schema()));
              RETURN NEW;
            END $fn$`
          // A DDL statement takes no parameters; the id is the database's own uuid.
          yield* sql.unsafe(`CREATE TRIGGER fanout_crash_hold BEFORE INSERT ON deliveries FOR EACH ROW
            WHEN (NEW.subscription_id = '${held!.id}'::uuid) EXECUTE FUNCTION fanout_crash_hold()`)
          yield* sql.withTransaction(Effect.gen(function*() {
            const [holder] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid,
              pg_advisory_xact_lock(hashtext('crm-relay.fanout-crash'), hashtext(current_schema()))`
            yield* Deferred.succeed(holding, holder!.pid)
            yield* Deferred.await(release)
          })).pipe(Effect.orDie, Effect.forkScoped)
          yield* Deferred.await(holding)
        }
        // The server's sessions waiting on the test's lock: the held second batch.
        const waiting = Effect.flatMap(Deferred.await(holding), (holder) =>
          sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE ${holder} = ANY (pg_blocking_pids(pid))`.pipe(Effect.orDie))

        const callId = `call-${randomUUID()}`
        const accepted = yield* adminRequest(adminUrl, "POST", `/v1/calls/${callId}/outcome`, {
          account_id: account["id"],
          tenant_id: "t-none",
          classification: "lead",
          source: "Fan-out crash (phone)",
          tags: [],
          caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+44 20 7946 0001"], emails: [], address: "" },
          lead: { job_type: "Survey", summary: "Needs a survey", notes: "", urgency: "" }
        })
        expect(accepted.status).toBe(202)
        expect(accepted.json).toMatchObject({ route: "event", deliveries: SUBSCRIPTIONS })
        const hooked = () => hooks.received().filter((d) => d.path.startsWith("/hook/"))
        if (db.kind === "postgres") {
          const written = sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE call_id = ${callId}`.pipe(Effect.orDie)
          yield* eventually(written, (rows) => rows[0]!.n === 500)
          // Killed only once the second batch waits: a statement still running could commit after the kill.
          yield* eventually(waiting, (pids) => pids.length >= 1)
          yield* eventually(Effect.sync(hooked), (d) => d.length >= 1)
        } else {
          yield* eventually(Effect.sync(hooked), (d) => d.length >= 1)
        }
        process.kill(first.pid, "SIGKILL")
        yield* eventually(Effect.sync(() => alive(first.pid)), (a) => !a)
        if (db.kind === "postgres") {
          // The dead host's waiting session ends (PostgreSQL would notice at its next write to it); then the lock
          // goes, and the trigger with it, before the restart.
          // Gone before the lock goes (the wait's timeout), else it could still take the lock and commit the batch.
          for (const { pid } of yield* waiting) {
            const [ended] = yield* sql<{ gone: boolean }>`SELECT pg_terminate_backend(${pid}, 10000) AS gone`
            expect(ended!.gone).toBe(true)
          }
          yield* Deferred.succeed(release, undefined)
          yield* sql`DROP TRIGGER fanout_crash_hold ON deliveries`
          yield* sql`DROP FUNCTION fanout_crash_hold()`
          const [left] = yield* sql<{ status: string; fanout_after: string | number; n: number }>`SELECT e.status, e.fanout_after,
            (SELECT count(*)::int FROM deliveries AS d WHERE d.event_id = e.id) AS n FROM events AS e WHERE e.call_id = ${callId}`
          // Killed mid-fan-out: half the deliveries written, the event still pending at its cursor.
          expect(left).toMatchObject({ status: "pending", n: 500 })
        }

        const second = yield* serve(env)
        yield* urlsOf(second.pid)
        // Every subscription's path is reached (on PostgreSQL after the dead worker's 30 s lease ends).
        yield* eventually(
          Effect.sync(() => new Set(hooked().map((d) => d.path)).size),
          (n) => n === SUBSCRIPTIONS,
          Duration.minutes(4)
        )
        const byPath = new Map<string, Set<string>>()
        for (const d of hooked()) byPath.set(d.path, (byPath.get(d.path) ?? new Set()).add(d.headers["webhook-id"]!))
        // One webhook-id per subscription, whoever sent it and however often.
        expect([...byPath.values()].filter((ids) => ids.size !== 1)).toEqual([])
        expect(new Set([...byPath.values()].flatMap((ids) => [...ids])).size).toBe(SUBSCRIPTIONS)
        // Each is the event, signed, with its delivery's id.
        const webhook = new Webhook(secret)
        for (const d of hooked().slice(0, 20)) {
          expect(webhook.verify(d.body, d.headers)).toMatchObject({ id: d.headers["webhook-id"], event: "lead", call_id: callId })
        }
        if (db.kind === "postgres") {
          const [stored] = yield* sql<{ n: number; pairs: number }>`SELECT count(*)::int AS n,
            count(DISTINCT subscription_id)::int AS pairs FROM deliveries WHERE call_id = ${callId}`
          expect(stored).toEqual({ n: SUBSCRIPTIONS, pairs: SUBSCRIPTIONS })
        }
        expect(yield* second.terminate).toBe(0)
      }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)
  })
})
