/**
 * The bound on an account's subscriptions (issue 35, part 2): exactly at it
 * a subscribe is accepted, one past it gets the contract's 400 with the Error
 * object; replicas subscribing at once never exceed it; hooks above a lowered
 * bound keep receiving; refusals are counted in a metric.
 */
import { expect, layer } from "@effect/vitest"
import { Subscriptions } from "@crm-relay/events"
import { TestDatabase } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Logger, LogLevel } from "effect"
import { randomUUID } from "node:crypto"
import * as MasterKey from "../src/config/MasterKey.js"
import * as Server from "../src/http/Server.js"
import { bridgeSide } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls, receiver, type Receiver } from "./support/Pipeline.js"
import { accountWithKey, ADMIN_TOKEN, adminRequest, bearer, jsonWith, layerServer, leadOutcome, replica, request, start } from "./support/TestServer.js"

/** The HTTPS receiver the hooks point at. */
class Hooks extends Context.Tag("test/SubscriptionLimitHooks")<Hooks, { readonly receiver: Receiver; readonly ca: string }>() {}

const HooksLive = Layer.scoped(
  Hooks,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    return { receiver: yield* receiver(tls), ca: tls.ca }
  })
)

/** A server (a replica of its own on PostgreSQL when `ownPool`) with the bound `limit`, delivering to the receiver. */
const server = (limit: number, options: { readonly ownPool?: boolean; readonly role?: "all" | "api" } = {}) =>
  Effect.gen(function*() {
    const { ca } = yield* Hooks
    const layer = layerServer({ role: options.role ?? "all", bridge: bridgeSide([ca]), maxSubscriptionsPerAccount: limit })
    return yield* start(options.ownPool === true ? yield* replica(layer) : layer)
  })

const subscribe = (base: string, key: string, targetUrl: string) =>
  request("POST", `${base}/subscribe`, { headers: jsonWith(key), body: JSON.stringify({ targetUrl, event: "all" }) })

const activeCount = (accountId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM subscriptions WHERE account_id = ${accountId} AND removed_at IS NULL`,
      (rows) => rows[0]!.n
    )).pipe(Effect.orDie)

/** The refusals counted so far by this process's metric, as the internal API's /metrics shows it. */
const refusalsCounted = (admin: string) =>
  Effect.map(request("GET", `${admin}/metrics`, { headers: bearer(ADMIN_TOKEN) }), (scraped) => {
    const line = /^crm_relay_subscription_limit_refusals_total(?:\{[^}]*\})? (\d+)/m.exec(scraped.text)
    return line === null ? 0 : Number(line[1])
  })

const sentence = (accountId: string, count: number, limit: number) =>
  `This account has ${count} subscriptions, the most it may have is ${limit}; ` +
  `see them in the Integrations area (or ask your administrator: crm-relay subscriptions list --account ${accountId}) ` +
  `and remove one with DELETE /subscribe/{id} before adding another.`

const Live = HooksLive.pipe(
  Layer.provideMerge(Server.servicesWith(MasterKey.processLocal)),
  Layer.provideMerge(TestDatabase.layer),
  Layer.provideMerge(Logger.minimumLogLevel(LogLevel.None))
)

layer(Live, { excludeTestServices: true })("a bound on subscriptions per account", (it) => {
  it.scoped("event-api.md 400 \"The request could not be accepted\": exactly at the bound 201, one past it 400 with the Error object saying the limit and how to remove a hook; disabled hooks count, removed ones do not; each refusal is counted", () =>
    Effect.gen(function*() {
      const { receiver } = yield* Hooks
      const s = yield* server(3)
      const { accountId, key } = yield* accountWithKey()
      const before = yield* refusalsCounted(s.admin)
      const ids: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const created = yield* subscribe(s.public, key, receiver.url(`/edge/${i}`))
        expect(created.status).toBe(201)
        ids.push((created.json as { id: string }).id)
      }
      // A disabled hook still counts: it rejoins the fan-out once enabled.
      expect((yield* adminRequest(s.admin, "POST", `/v1/accounts/${accountId}/subscriptions/${ids[0]}/disable`, {})).status).toBe(200)
      const past = yield* subscribe(s.public, key, receiver.url("/edge/past"))
      expect(past.status).toBe(400)
      expect(past.json).toEqual({ error: sentence(accountId, 3, 3) })
      expect(yield* activeCount(accountId)).toBe(3)
      expect(yield* refusalsCounted(s.admin)).toBe(before + 1)
      // Another account is not affected by this one's hooks.
      const other = yield* accountWithKey()
      expect((yield* subscribe(s.public, other.key, receiver.url("/edge/other"))).status).toBe(201)
      // Removing one makes room for one.
      expect((yield* request("DELETE", `${s.public}/subscribe/${ids[1]}`, { headers: bearer(key) })).status).toBe(204)
      expect((yield* subscribe(s.public, key, receiver.url("/edge/again"))).status).toBe(201)
      expect((yield* subscribe(s.public, key, receiver.url("/edge/again"))).status).toBe(400)
    }))

  it.scoped("Issue 35 \"Subscribing at the bound from two replicas at once must not exceed it\": 24 subscribes at once through two servers (each its own pool on PostgreSQL) leave exactly the bound", () =>
    Effect.gen(function*() {
      const { receiver } = yield* Hooks
      const limit = 5
      const a = yield* server(limit, { role: "api" })
      const b = yield* server(limit, { role: "api", ownPool: true })
      const { accountId, key } = yield* accountWithKey()
      const answers = yield* Effect.all(
        Array.from({ length: 24 }, (_, i) => subscribe(i % 2 === 0 ? a.public : b.public, key, receiver.url(`/race/${i}`))),
        { concurrency: "unbounded" }
      )
      expect(answers.filter((r) => r.status === 201)).toHaveLength(limit)
      const refused = answers.filter((r) => r.status !== 201)
      expect(refused.map((r) => r.status)).toEqual(Array.from({ length: 24 - limit }, () => 400))
      for (const r of refused) expect(r.json).toEqual({ error: sentence(accountId, limit, limit) })
      expect(yield* activeCount(accountId)).toBe(limit)
    }))

  it.scoped("Issue 35 \"Hooks that exist above a newly lowered bound keep working; only new ones are refused\": four hooks, the bound lowered to two, an outcome still reaches all four", () =>
    Effect.gen(function*() {
      const { receiver } = yield* Hooks
      const before = yield* server(4, { role: "api" })
      const { accountId, key } = yield* accountWithKey()
      const run = randomUUID()
      const paths = Array.from({ length: 4 }, (_, i) => `/lowered/${run}/${i}`)
      for (const path of paths) expect((yield* subscribe(before.public, key, receiver.url(path))).status).toBe(201)

      const lowered = yield* server(2)
      const refused = yield* subscribe(lowered.public, key, receiver.url(`/lowered/${run}/new`))
      expect(refused.status).toBe(400)
      expect(refused.json).toEqual({ error: sentence(accountId, 4, 2) })

      const accepted = yield* adminRequest(lowered.admin, "POST", `/v1/calls/call-${run}/outcome`, leadOutcome(accountId))
      expect(accepted.status).toBe(202)
      const received = yield* eventually(
        Effect.sync(() => receiver.received().filter((r) => r.path.startsWith(`/lowered/${run}/`))),
        (r) => new Set(r.map((d) => d.path)).size === 4
      )
      expect([...new Set(received.map((d) => d.path))].sort()).toEqual(paths)
    }))
})

// The service's default, for servers and tools that are not given MAX_SUBSCRIPTIONS_PER_ACCOUNT.
layer(Layer.empty)("the bound's default", (it) => {
  it.effect("Issue 35 \"a default a real account never meets, say 100\"", () =>
    Effect.map(Subscriptions.SubscriptionLimit, (limit) => expect(limit).toBe(100)))
})
