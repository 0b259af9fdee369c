/**
 * The receiver lifecycle through the running server: a loopback HTTPS
 * receiver answers 410 or fails, the Event API and the internal API show
 * what became of the subscription, and the operator (or the Integrations
 * area, which calls the same internal API) disables, enables and recovers,
 * also through the CLI's remote operations.
 */
import { FetchHttpClient } from "@effect/platform"
import { expect, layer } from "@effect/vitest"
import type * as Api from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"
import type { Certificate } from "@crm-relay/testing"
import { Context, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { randomUUID } from "node:crypto"
import type * as Http from "node:http"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import type { DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import type { SubscriptionPage } from "@crm-relay/contract/InternalApi/ListingsApi"
import { Deliveries } from "@crm-relay/events"
import { DeliveryOperations, layerRemote as deliveryOperations } from "../src/cli/DeliveryOperations.js"
import { layerRemote, SubscriptionOperations } from "../src/cli/SubscriptionOperations.js"
import * as Server from "../src/http/Server.js"
import { bridgeSide, RECEIVER_HOST } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { accountWithKey, ADMIN_TOKEN, adminOf, bearer, harnessOver, jsonWith, layerServer, request } from "./support/TestServer.js"

/** A receiver answering 410 on paths under /gone/, 503 on paths marked dead, 200 otherwise. */
interface Receiver {
  readonly url: (path: string) => string
  readonly dead: Set<string>
  readonly received: (path: string) => ReadonlyArray<Readonly<Record<string, string | Array<string> | undefined>>>
}

const receiver = (tls: Certificate.TlsMaterial): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    const dead = new Set<string>()
    const log: Array<{ path: string; headers: Http.IncomingHttpHeaders }> = []
    const server = yield* Effect.acquireRelease(
      Effect.async<Https.Server>((resume) => {
        const s = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
          req.resume()
          req.on("end", () => {
            const path = req.url ?? ""
            log.push({ path, headers: req.headers })
            const status = path.startsWith("/gone/") ? 410 : dead.has(path) ? 503 : 200
            res.writeHead(status, { "content-type": "application/json" }).end("{}")
          })
        })
        s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
      }),
      (s) => Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
    )
    const port = (server.address() as AddressInfo).port
    return {
      url: (path) => `https://${RECEIVER_HOST}:${port}${path}`,
      dead,
      received: (path) => log.filter((r) => r.path === path).map((r) => r.headers)
    }
  })

class Harness extends Context.Tag("test/LifecycleHarness")<Harness, {
  readonly admin: string
  readonly public: string
  readonly receiver: Receiver
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const hooks = yield* receiver(tls)
    const server = yield* Layer.build(layerServer({ role: "all", bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
    const listening = Context.get(server, Server.Listening)
    return { admin: listening.internalApi.url, public: Option.getOrThrow(listening.publicApi).url, receiver: hooks }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

/** An account with a key and one subscription (through the Event API) to `hookPath`. */
const subscribed = (hookPath: string) =>
  Effect.gen(function*() {
    const h = yield* Harness
    const { accountId, key } = yield* accountWithKey()
    const answer = yield* request("POST", `${h.public}/subscribe`, {
      headers: jsonWith(key),
      body: JSON.stringify({ targetUrl: h.receiver.url(hookPath), event: "all" })
    })
    expect(answer.status).toBe(201)
    return { accountId, key, subscriptionId: (answer.json as { id: string }).id }
  })

/** Posts a lead outcome for `accountId` (no bridge: the event fans out at once). */
const lead = (accountId: string) =>
  Effect.gen(function*() {
    const answer = yield* admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, {
      account_id: accountId,
      tenant_id: "t-1",
      classification: "lead",
      source: "Receptionist (phone)",
      tags: [],
      caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+1 555 0100"], emails: [], address: "" },
      lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "normal" }
    })
    expect(answer.status).toBe(202)
  })

const deliveries = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries`), (a) => a.json as DeliveryPage)

const status = (accountId: string, subscriptionId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/subscriptions/${subscriptionId}`), (a) => a.json as Api.SubscriptionStatus)

layer(harness, { excludeTestServices: true })("receiver lifecycle on the server", (it) => {
  it.effect("410 Gone: the subscription is removed at once and shown as removed (gone) in the listings and the attempt log; DELETE /subscribe/{id} then answers 404 (\"An unknown id, an already removed id or another account's id gives 404.\")", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId, key, subscriptionId } = yield* subscribed(`/gone/${randomUUID()}`)
      yield* lead(accountId)
      const page = yield* eventually(deliveries(accountId), (p) => p.deliveries[0]?.status === "ended")
      expect(page.deliveries[0]).toMatchObject({
        status: "ended",
        last_attempt: { status_code: 410, error_class: "gone" },
        next_attempt_at: null
      })
      expect(page.deliveries[0]!.last_error).toMatch(/410 Gone/)
      const removed = yield* request("DELETE", `${h.public}/subscribe/${subscriptionId}`, { headers: bearer(key) })
      expect(removed.status).toBe(404)
      expect(yield* status(accountId, subscriptionId)).toMatchObject({ state: "removed", removed_reason: "gone", disabled_at: null })
      const active = (yield* admin("GET", `/v1/accounts/${accountId}/subscriptions`)).json as SubscriptionPage
      expect(active.subscriptions).toEqual([])
      const all = (yield* admin("GET", `/v1/accounts/${accountId}/subscriptions?removed=true`)).json as SubscriptionPage
      expect(all.subscriptions).toMatchObject([{ id: subscriptionId, state: "removed", removed_reason: "gone" }])
      const ended = (yield* admin("GET", "/v1/deliveries?status=ended&account=" + accountId)).json as DeliveryPage
      expect(ended.deliveries).toHaveLength(1)
      // The next event queues nothing for it.
      yield* lead(accountId)
      expect((yield* deliveries(accountId)).deliveries).toHaveLength(1)
    }))

  it.effect("Replay of a delivery whose subscription is gone (410, or removed with DELETE /subscribe/{id}) or disabled is refused with 409 and the reason, on the internal API and in the CLI's operations, and nothing is queued or sent; after enable the same delivery is replayed with the same webhook-id", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const operations = yield* Effect.provide(
        DeliveryOperations,
        deliveryOperations(h.admin, Redacted.make(ADMIN_TOKEN)).pipe(Layer.provide(FetchHttpClient.layer))
      )
      const replay = (id: string) => admin("POST", `/v1/deliveries/${id}/replay`)

      // Gone after 410.
      const gonePath = `/gone/${randomUUID()}`
      const gone = yield* subscribed(gonePath)
      yield* lead(gone.accountId)
      const goneId = (yield* eventually(deliveries(gone.accountId), (p) => p.deliveries[0]?.status === "ended")).deliveries[0]!.id
      const refusedGone = yield* replay(goneId)
      expect(refusedGone.status).toBe(409)
      expect(refusedGone.json).toEqual({ error: Deliveries.notReplayable.subscription_gone })
      expect((yield* Effect.flip(operations.replay(goneId))).message).toBe(Deliveries.notReplayable.subscription_gone)

      // Removed by its owner (DELETE /subscribe/{id}) after a delivery.
      const removedPath = `/hooks/${randomUUID()}`
      const removed = yield* subscribed(removedPath)
      yield* lead(removed.accountId)
      const removedId = (yield* eventually(deliveries(removed.accountId), (p) => p.deliveries[0]?.status === "delivered")).deliveries[0]!.id
      expect((yield* request("DELETE", `${h.public}/subscribe/${removed.subscriptionId}`, { headers: bearer(removed.key) })).status).toBe(204)
      const refusedRemoved = yield* replay(removedId)
      expect(refusedRemoved.status).toBe(409)
      expect(refusedRemoved.json).toEqual({ error: Deliveries.notReplayable.subscription_removed })

      // Disabled: refused until enabled, then replayed with the same webhook-id.
      const disabledPath = `/hooks/${randomUUID()}`
      const disabled = yield* subscribed(disabledPath)
      yield* lead(disabled.accountId)
      const disabledId = (yield* eventually(deliveries(disabled.accountId), (p) => p.deliveries[0]?.status === "delivered")).deliveries[0]!.id
      yield* admin("POST", `/v1/accounts/${disabled.accountId}/subscriptions/${disabled.subscriptionId}/disable`, { reason: "Maintenance." })
      const refusedDisabled = yield* replay(disabledId)
      expect(refusedDisabled.status).toBe(409)
      expect(refusedDisabled.json).toEqual({ error: Deliveries.notReplayable.subscription_disabled })
      expect((yield* deliveries(disabled.accountId)).deliveries[0]).toMatchObject({ id: disabledId, status: "delivered", attempts: 1 })
      yield* admin("POST", `/v1/accounts/${disabled.accountId}/subscriptions/${disabled.subscriptionId}/enable`)
      expect((yield* replay(disabledId)).json).toEqual({ id: disabledId, outcome: "queued" })
      yield* eventually(Effect.sync(() => h.receiver.received(disabledPath).length), (n) => n === 2)
      expect(h.receiver.received(disabledPath).map((r) => r["webhook-id"])).toEqual([disabledId, disabledId])

      // Nothing was sent again to the gone or removed receivers.
      expect(h.receiver.received(gonePath)).toHaveLength(1)
      expect(h.receiver.received(removedPath)).toHaveLength(1)
    }))

  it.effect("Disable, enable and recover on the internal API (what the CLI and the Integrations area call): a disabled subscription gets no new deliveries and its pending ones end; recover is refused while disabled (409), with a window in the future or reversed (400), for another account's subscription (404); after enable it replays every ended delivery since the time, with progress", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const hookPath = `/hooks/${randomUUID()}`
      h.receiver.dead.add(hookPath)
      const { accountId, subscriptionId } = yield* subscribed(hookPath)
      const since = new Date(Date.now() - 1000).toISOString()
      yield* lead(accountId)
      yield* eventually(deliveries(accountId), (p) => p.deliveries[0]?.attempts === 1 && p.deliveries[0].last_attempt !== null)
      const disabled = yield* admin("POST", `/v1/accounts/${accountId}/subscriptions/${subscriptionId}/disable`, { reason: "Receiver under maintenance." })
      expect(disabled.status).toBe(200)
      expect(disabled.json).toEqual({ id: subscriptionId, outcome: "disabled" })
      expect(yield* status(accountId, subscriptionId)).toMatchObject({ state: "disabled", disabled_reason: "Receiver under maintenance." })
      yield* eventually(deliveries(accountId), (p) => p.deliveries[0]?.status === "ended")
      yield* lead(accountId)
      expect((yield* deliveries(accountId)).deliveries).toHaveLength(1)

      const recover = (id: string, body: unknown, account = accountId) =>
        admin("POST", `/v1/accounts/${account}/subscriptions/${id}/recover`, body)
      const refusedDisabled = yield* recover(subscriptionId, { since })
      expect(refusedDisabled.status).toBe(409)
      expect(refusedDisabled.json).toEqual({ error: `Subscription ${subscriptionId} is disabled; enable it first, then recover.` })
      expect((yield* admin("POST", `/v1/accounts/${accountId}/subscriptions/${subscriptionId}/enable`)).json)
        .toEqual({ id: subscriptionId, outcome: "enabled" })
      const future = yield* recover(subscriptionId, { since: new Date(Date.now() + 3_600_000).toISOString() })
      expect(future.status).toBe(400)
      expect((future.json as { error: string }).error).toMatch(/is in the future/)
      const reversed = yield* recover(subscriptionId, { since, until: new Date(Date.parse(since) - 60_000).toISOString() })
      expect(reversed.status).toBe(400)
      expect((reversed.json as { error: string }).error).toMatch(/^The window is reversed/)
      expect((yield* recover(subscriptionId, { since: "yesterday-ish" })).status).toBe(400)
      const other = yield* subscribed(`/hooks/${randomUUID()}`)
      expect((yield* recover(other.subscriptionId, { since })).status).toBe(404)
      expect((yield* recover(randomUUID(), { since })).status).toBe(404)
      expect((yield* admin("POST", `/v1/accounts/${randomUUID()}/subscriptions/${subscriptionId}/enable`)).status).toBe(404)

      // Through the CLI's remote operations, as `crm-relay subscriptions recover` runs them.
      h.receiver.dead.delete(hookPath)
      const operations = yield* Effect.provide(
        SubscriptionOperations,
        layerRemote(h.admin, Redacted.make(ADMIN_TOKEN)).pipe(Layer.provide(FetchHttpClient.layer))
      )
      const started = yield* operations.recover(accountId, subscriptionId, { since: new Date(since) })
      expect(started).toMatchObject({ subscription_id: subscriptionId, total: 1 })
      const done = yield* eventually(operations.recovery(accountId, started.id), (r) => r.status === "done")
      expect(done).toMatchObject({ total: 1, queued: 1, skipped: 0 })
      const page = yield* eventually(deliveries(accountId), (p) => p.deliveries[0]?.status === "delivered")
      const id = page.deliveries[0]!.id
      expect(h.receiver.received(hookPath).map((r) => r["webhook-id"])).toEqual([id, id])
      expect(yield* operations.show(accountId, subscriptionId)).toMatchObject({ state: "active", disabled_at: null, failing_since: null })
    }))
})
