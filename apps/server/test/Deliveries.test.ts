/**
 * Webhook deliveries through the running server: an outcome for an account
 * without a bridge fans out at once, the registered delivery worker POSTs it
 * to a loopback HTTPS receiver, and the operator lists, inspects and replays
 * it on the internal API (and through the CLI's operations, remotely and as
 * a child process on the database). `/perform-list` samples the real
 * delivery. ROLE api runs no worker.
 */
import { FetchHttpClient } from "@effect/platform"
import { expect, layer } from "@effect/vitest"
import { Accounts, Fanout, IntegrationKeys, KeyTags } from "@crm-relay/events"
import { Database, Migrations, TestDatabase } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Path from "node:path"
import type { DeliveryDetail, DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { DeliveryOperations, layerRemote } from "../src/cli/DeliveryOperations.js"
import * as MasterKey from "../src/config/MasterKey.js"
import * as Server from "../src/http/Server.js"
import { cli, PROCESS_TEST_TIMEOUT } from "./support/Cli.js"
import { bridgeSide, RECEIVER_HOST } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls, receiver, type Receiver } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { accountWithKey, ADMIN_TOKEN, adminOf, bearer, jsonWith, layerServer, leadOutcome, request } from "./support/TestServer.js"

type Json = Record<string, unknown>

/** A server (ROLE `role`) and a receiver over the database of the context. */
class Harness extends Context.Tag("test/DeliveriesHarness")<Harness, {
  readonly admin: string
  readonly public: string
  readonly receiver: Receiver
}>() {}

const harness = (role: "all" | "api") =>
  Layer.scoped(
    Harness,
    Effect.gen(function*() {
      const tls = yield* loopbackTls
      const hooks = yield* receiver(tls)
      const server = yield* Layer.build(layerServer({ role, bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
      const listening = Context.get(server, Server.Listening)
      return { admin: listening.internalApi.url, public: Option.getOrThrow(listening.publicApi).url, receiver: hooks }
    })
  )

const admin = adminOf(Harness)

/** An account (no bridge connection) with an integration key and one subscription to the receiver. */
const subscribedAccount = (hookPath: string) =>
  Effect.gen(function*() {
    const h = yield* Harness
    const { accountId, key } = yield* accountWithKey()
    const subscribed = yield* request("POST", `${h.public}/subscribe`, {
      headers: jsonWith(key),
      body: JSON.stringify({ targetUrl: h.receiver.url(hookPath), event: "all" })
    })
    expect(subscribed.status).toBe(201)
    return { accountId, key }
  })

const postOutcome = (accountId: string) =>
  Effect.gen(function*() {
    const callId = `call-${randomUUID()}`
    const accepted = yield* admin("POST", `/v1/calls/${callId}/outcome`, leadOutcome(accountId))
    expect(accepted.status).toBe(202)
    return callId
  })

const list = (accountId: string, query = "") =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries${query}`), (a) => a.json as DeliveryPage)

/** The harness plus the Event API services (to seed accounts and keys) over a fresh test database. */
const withDatabase = (role: "all" | "api") =>
  harness(role).pipe(
    Layer.provideMerge(Server.servicesWith(MasterKey.processLocal)),
    Layer.provideMerge(TestDatabase.layer),
    Layer.provideMerge(Logger.minimumLogLevel(LogLevel.None))
  )

layer(withDatabase("all"), { excludeTestServices: true })("deliveries on the server", (it) => {
  it.effect("Operator surface: an outcome's lead event is delivered, listed (status, attempts, last attempt, target without its query), inspected with its attempt log, and replayed with the same webhook-id (202)", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const hookPath = `/hooks/${randomUUID()}?token=s3cret`
      const { accountId, key } = yield* subscribedAccount(hookPath)
      const callId = yield* postOutcome(accountId)
      const page = yield* eventually(list(accountId), (p) => p.deliveries[0]?.status === "delivered")
      expect(page.next_cursor).toBeNull()
      const [delivery] = page.deliveries
      expect(delivery).toMatchObject({
        event: "lead",
        call_id: callId,
        status: "delivered",
        attempts: 1,
        last_error: null,
        next_attempt_at: null,
        target: `https://${RECEIVER_HOST}:${new URL(h.receiver.url("/")).port}${hookPath.split("?")[0]}?…`,
        last_attempt: { status_code: 200, error_class: null }
      })
      expect(JSON.stringify(page)).not.toContain("s3cret")
      const sent = h.receiver.received().filter((r) => r.path === hookPath)
      expect(sent.map((r) => r.headers["webhook-id"])).toEqual([delivery!.id])

      const detail = (yield* admin("GET", `/v1/deliveries/${delivery!.id}`)).json as DeliveryDetail
      expect(detail.attempt_log).toHaveLength(1)
      expect(detail.attempt_log[0]).toMatchObject({ attempt: 1, status_code: 200, error_class: null, result: "delivered" })

      const replayed = yield* admin("POST", `/v1/deliveries/${delivery!.id}/replay`)
      expect(replayed.status).toBe(202)
      expect(replayed.json).toEqual({ id: delivery!.id, outcome: "queued" })
      yield* eventually(Effect.sync(() => h.receiver.received().filter((r) => r.path === hookPath)), (r) => r.length === 2)
      const again = h.receiver.received().filter((r) => r.path === hookPath)
      expect(again.map((r) => r.headers["webhook-id"])).toEqual([delivery!.id, delivery!.id])
      expect(again[1]!.body).toBe(again[0]!.body)
      const detailAfter = yield* eventually(
        Effect.map(admin("GET", `/v1/deliveries/${delivery!.id}`), (a) => a.json as DeliveryDetail),
        (d) => d.attempt_log.length === 2 && d.status === "delivered"
      )
      expect(detailAfter.attempt_log.map((a) => a.result)).toEqual(["delivered", "delivered"])

      // perform-list samples the real delivery: only the contact's external id; job type and summary empty.
      const preview = yield* request("GET", `${h.public}/perform-list`, { headers: bearer(key) })
      expect(preview.json).toEqual([{
        id: delivery!.id,
        call_id: callId,
        source: "Acme Receptionist (phone)",
        contact: { external_id: "" },
        job_type: "",
        summary: "",
        booked: false
      }])
    }))

  it.effect("Operator surface: pages of deliveries latest first with limit and next_cursor; unknown account or delivery → 404; a bad cursor or limit → 400", () =>
    Effect.gen(function*() {
      const { accountId } = yield* subscribedAccount(`/hooks/${randomUUID()}`)
      const calls: Array<string> = []
      for (let i = 0; i < 3; i++) calls.push(yield* postOutcome(accountId))
      // Each outcome's delivery is written by the workers' fan-out, just after its acceptance.
      yield* eventually(list(accountId), (p) => p.deliveries.length === 3)
      const first = yield* list(accountId, "?limit=2")
      expect(first.deliveries.map((d) => d.call_id)).toEqual([calls[2], calls[1]])
      expect(first.next_cursor).toBe(first.deliveries[1]!.id)
      const second = yield* list(accountId, `?limit=2&cursor=${first.next_cursor}`)
      expect(second.deliveries.map((d) => d.call_id)).toEqual([calls[0]])
      expect(second.next_cursor).toBeNull()

      const unknownAccount = yield* admin("GET", `/v1/accounts/${randomUUID()}/deliveries`)
      expect(unknownAccount.status).toBe(404)
      expect(unknownAccount.json).toEqual({ error: "No account with this id exists." })
      const badCursor = yield* admin("GET", `/v1/accounts/${accountId}/deliveries?cursor=${randomUUID()}`)
      expect(badCursor.status).toBe(400)
      expect((badCursor.json as Json)["error"]).toContain("cursor")
      const badLimit = yield* admin("GET", `/v1/accounts/${accountId}/deliveries?limit=0`)
      expect(badLimit.status).toBe(400)
      expect((badLimit.json as Json)["error"]).toContain("limit")
      expect((yield* admin("GET", `/v1/deliveries/${randomUUID()}`)).status).toBe(404)
      expect((yield* admin("POST", `/v1/deliveries/${randomUUID()}/replay`)).status).toBe(404)
      expect((yield* admin("POST", "/v1/deliveries/not-an-id/replay")).status).toBe(404)
      const anonymous = yield* request("GET", `${(yield* Harness).admin}/v1/accounts/${accountId}/deliveries`)
      expect(anonymous.status).toBe(401)
    }))

  it.effect("CLI operations through a running server's internal API: list pages and replay (a pending delivery is left alone; unknown ids are named)", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId } = yield* subscribedAccount(`/hooks/${randomUUID()}`)
      yield* postOutcome(accountId)
      const operations = yield* Effect.provide(
        DeliveryOperations,
        layerRemote(h.admin, Redacted.make(ADMIN_TOKEN)).pipe(Layer.provide(FetchHttpClient.layer))
      )
      const page = yield* eventually(operations.list(accountId, { limit: 10, cursor: Option.none() }), (p) =>
        p.deliveries[0]?.status === "delivered")
      const id = page.deliveries[0]!.id
      expect(yield* operations.replay(id)).toBe("queued")
      // Just queued, so pending (or already delivered again by the worker): a pending one is left as it is.
      const second = yield* operations.replay(id)
      expect(["already_pending", "queued"]).toContain(second)
      const unknown = yield* Effect.flip(operations.replay(randomUUID()))
      expect(unknown.message).toMatch(/^No delivery with id .* exists\.$/)
      const unknownAccount = yield* Effect.flip(operations.list(randomUUID(), { limit: 10, cursor: Option.none() }))
      expect(unknownAccount.message).toMatch(/^No account with id .* exists\.$/)
    }))
})

layer(withDatabase("api"), { excludeTestServices: true })("ROLE=api", (it) => {
  it.effect("ROLE api runs no worker: the accepted event (one subscription: fanned out in its intake) waits for a worker's delivery runner (pending, no attempt) and nothing reaches the receiver", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const hookPath = `/hooks/${randomUUID()}`
      const { accountId } = yield* subscribedAccount(hookPath)
      yield* postOutcome(accountId)
      yield* Effect.sleep("1500 millis")
      const page = yield* list(accountId)
      expect(page.deliveries.map((d) => ({ status: d.status, attempts: d.attempts }))).toEqual([{ status: "pending", attempts: 0 }])
      expect(h.receiver.received().filter((r) => r.path === hookPath)).toEqual([])
    }))
})

/** Runs `effect` on the database the CLI children use (the test schema, or the PGlite in `dataDir`). */
const onCliDatabase = <A, E, R>(dataDir: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const db = yield* TestDatabase.TestDatabase
    if (db.kind === "postgres") return yield* effect
    return yield* effect.pipe(Effect.provide(Layer.fresh(Database.layerPglite({ dataDir }))), Effect.orDie)
  })

layer(Layer.merge(TestDatabase.layer, Logger.minimumLogLevel(LogLevel.None)), { excludeTestServices: true })("crm-relay deliveries (child process)", (it) => {
  it.scoped("without a running server: deliveries list --account ID [--json] and deliveries replay --id ID work on the database", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase.TestDatabase
      const dataDir = Path.join(yield* tempDir("crm-relay-deliveries-cli-"), "data")
      const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning" }
      if (Option.isSome(db.url)) env["DATABASE_URL"] = Redacted.value(db.url.value)
      // Seeded in process (an account, a key, a subscription and one failed delivery); each child opens PGlite anew, so few commands.
      const seeded = yield* onCliDatabase(dataDir, Effect.gen(function*() {
        yield* Migrations.run()
        const account = yield* (yield* Accounts.Accounts).create({ name: "CLI", mode: "live" })
        const key = yield* (yield* IntegrationKeys.IntegrationKeys).create(account.id)
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO subscriptions (account_id, created_by_key_id, target_url, event)
          VALUES (${account.id}, ${key.id}, 'https://hooks.example.com/cli?token=x', 'lead')`
        const [id] = yield* (yield* Fanout.Fanout).enqueue({
          accountId: account.id,
          callId: "call-cli-1",
          source: "Receptionist (phone)",
          contact: { external_id: "c-1", full_name: "", first_name: "", last_name: "", phones: [], emails: [], address: "" },
          jobType: "",
          summary: "",
          appointment: Option.none()
        })
        yield* sql`UPDATE deliveries SET status = 'failed', attempts = 8, last_error = 'Gave up' WHERE id = ${id!}`
        return { accountId: account.id, deliveryId: id! }
      }).pipe(Effect.provide(Layer.mergeAll(Fanout.Fanout.Default, Accounts.Accounts.Default, IntegrationKeys.IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerTest))))))
      const { accountId, deliveryId } = seeded

      const text = yield* cli(["deliveries", "list", "--account", accountId], env)
      expect(text.code, text.stderr).toBe(0)
      expect(text.stdout).toContain(`${deliveryId}  lead call call-cli-1  failed  attempts 8`)
      expect(text.stdout).toContain("https://hooks.example.com/cli?…  (no attempt yet)")
      expect(text.stdout).toContain("last error: Gave up")

      const replayed = yield* cli(["deliveries", "replay", "--id", deliveryId, "--json"], env)
      expect(JSON.parse(replayed.stdout)).toEqual({ id: deliveryId, outcome: "queued" })
      const listed = yield* cli(["deliveries", "list", "--account", accountId, "--json"], env)
      const page = JSON.parse(listed.stdout) as DeliveryPage
      expect(page.deliveries.map((d) => [d.id, d.call_id, d.status, d.attempts, d.target])).toEqual([
        [deliveryId, "call-cli-1", "pending", 0, "https://hooks.example.com/cli?…"]
      ])
      expect(page.next_cursor).toBeNull()

      const unknown = yield* cli(["deliveries", "replay", "--id", "0f8fad5b-d9cb-469f-a165-70867728950e"], env)
      expect(unknown.code, unknown.stderr).toBe(2)
      expect(unknown.stderr).toContain("No delivery with id 0f8fad5b-d9cb-469f-a165-70867728950e exists.")
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
