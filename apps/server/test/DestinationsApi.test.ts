/**
 * Event destinations through the running server's internal API: created
 * only after the kind's check (a refusal is a 400 with one sentence and
 * nothing stored), listed and shown without credentials, delivered to by
 * the same worker as REST hooks (signed, with the delivery id), sent a test
 * event, disabled, enabled and removed. The public Event API keeps its three
 * pairs: its unsubscribe cannot touch a destination.
 */
import { FetchHttpClient } from "@effect/platform"
import { expect, layer } from "@effect/vitest"
import type { DestinationView } from "@crm-relay/contract/Destinations"
import type { DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { DestinationOperations, layerRemote } from "../src/cli/DestinationOperations.js"
import * as Server from "../src/http/Server.js"
import { BROKER_HOST, bridgeSide, PRIVATE_HOST } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls, receiver } from "./support/Pipeline.js"
import { accountWithKey, ADMIN_TOKEN, adminOf, bearer, harnessOver, layerServer, leadOutcome, request } from "./support/TestServer.js"

class Harness extends Context.Tag("test/DestinationsHarness")<Harness, {
  readonly admin: string
  readonly public: string
  readonly hooks: Effect.Effect.Success<ReturnType<typeof receiver>>
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const hooks = yield* receiver(tls)
    const server = yield* Layer.build(layerServer({ role: "all", bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
    const listening = Context.get(server, Server.Listening)
    return { admin: listening.internalApi.url, public: Option.getOrThrow(listening.publicApi).url, hooks }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

layer(harness, { excludeTestServices: true })("destinations on the internal API", (it) => {
  it.effect("Bad input: an unknown kind, a URL of the wrong scheme, a configuration without its url → 400 with one sentence, nothing stored", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      const create = (kind: string, config: Record<string, unknown>) =>
        admin("POST", `/v1/accounts/${accountId}/destinations`, { kind, name: "Ours", config })
      const answers = [
        yield* create("carrier_pigeon", { url: "https://hooks.example/x" }),
        yield* create("webhook", { url: "http://hooks.example/x" }),
        yield* create("webhook", { target: "https://hooks.example/x" })
      ]
      expect(answers.map((a) => [a.status, (a.json as { error: string }).error])).toEqual([
        [400, "The destination kind must be one of \"webhook\", \"rabbitmq\", \"nats\"."],
        [400, "The webhook URL must start with https://."],
        [400, "The configuration must name the target's url."]
      ])
      const listed = yield* admin("GET", `/v1/accounts/${accountId}/destinations`)
      expect(listed.json).toEqual({ items: [] })
      expect((yield* admin("GET", `/v1/accounts/${randomUUID()}/destinations`)).status).toBe(404)
    }))

  it.effect("Bad input for the broker kinds: a URL of the wrong scheme, an exchange name or subject the broker would reject, a private address without the allowance → 400 with one sentence, nothing stored (no row, no sealed secret)", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      const sql = yield* SqlClient.SqlClient
      const stored = sql<{ destinations: number; secrets: number }>`SELECT
          (SELECT count(*)::int FROM destinations) AS destinations, (SELECT count(*)::int FROM vault_secrets) AS secrets`.pipe(
        Effect.map((rows) => rows[0]!)
      )
      const before = yield* stored
      const rabbit = (config: Record<string, unknown>) =>
        admin("POST", `/v1/accounts/${accountId}/destinations`, {
          kind: "rabbitmq",
          name: "Ours",
          config: { url: `amqps://${BROKER_HOST}`, exchange: "crm", routing_key: "lead", ...config },
          credentials: { username: "relay", password: "secret" }
        })
      const nats = (config: Record<string, unknown>) =>
        admin("POST", `/v1/accounts/${accountId}/destinations`, {
          kind: "nats",
          name: "Ours",
          config: { url: `tls://${BROKER_HOST}`, subject: "crm.leads", ...config },
          credentials: { user: "relay", password: "secret" }
        })
      const answers = [
        yield* rabbit({ url: `https://${BROKER_HOST}` }),
        yield* nats({ url: `amqps://${BROKER_HOST}` }),
        yield* rabbit({ exchange: "crm events" }),
        yield* nats({ subject: "crm.*" }),
        yield* rabbit({ url: `amqp://${PRIVATE_HOST}:5672` }),
        yield* nats({ url: `tls://${PRIVATE_HOST}:4222` })
      ]
      const errors = answers.map((a) => (a.json as { error: string }).error)
      expect(answers.map((a) => a.status)).toEqual([400, 400, 400, 400, 400, 400])
      for (const error of errors) expect(error).toMatch(/^[A-Z][^\n]*\.$/)
      expect(errors).toEqual([
        expect.stringContaining("amqps://"),
        expect.stringContaining("tls://"),
        expect.stringContaining("letter, a digit"),
        expect.stringContaining("wildcards"),
        expect.stringMatching(/private/i),
        expect.stringMatching(/private/i)
      ])
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations`)).json).toEqual({ items: [] })
      expect(yield* stored).toEqual(before)
    }).pipe(Effect.orDie))

  it.effect("A webhook destination receives the account's leads signed with their delivery id, a test event, nothing while disabled, and nothing once removed; DELETE /subscribe/{id} of the public API cannot remove it", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId, key } = yield* accountWithKey()
      const path = `/destination/${randomUUID()}`
      const created = yield* admin("POST", `/v1/accounts/${accountId}/destinations`, {
        kind: "webhook",
        name: "Our webhook",
        event: "lead",
        config: { url: h.hooks.url(path) }
      })
      expect(created.status).toBe(201)
      const destination = created.json as DestinationView
      expect(destination).toMatchObject({ kind: "webhook", name: "Our webhook", event: "lead", state: "active", has_credentials: false })
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations/${destination.id}`)).json).toEqual(destination)

      const arrived = () => h.hooks.received().filter((r) => r.path === path)
      expect((yield* admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, leadOutcome(accountId)))).toMatchObject({ status: 202 })
      yield* eventually(Effect.sync(arrived), (r) => r.length >= 1)
      // The receiver has the POST before the runner records its answer: wait for the record, not the arrival.
      const page = yield* eventually(
        Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries`), (answer) => answer.json as DeliveryPage),
        (p) => p.deliveries[0]?.status === "delivered"
      )
      expect(arrived()[0]!.headers["webhook-id"]).toBe(page.deliveries[0]!.id)
      // Handed to this replica's runner by the outcome intake (attempt 1), as REST hooks' deliveries are.
      expect(page.deliveries[0]).toMatchObject({ status: "delivered", attempts: 1 })
      expect(arrived()[0]!.headers["webhook-signature"]).toMatch(/^v1,/)

      const test = yield* admin("POST", `/v1/accounts/${accountId}/destinations/${destination.id}/test`)
      expect(test.status).toBe(202)
      const testId = (test.json as { delivery_id: string }).delivery_id
      yield* eventually(Effect.sync(arrived), (r) => r.some((x) => x.headers["webhook-id"] === testId))

      const publicDelete = yield* request("DELETE", `${h.public}/subscribe/${destination.subscription_id}`, { headers: bearer(key) })
      expect(publicDelete.status).toBe(404)

      expect((yield* admin("POST", `/v1/accounts/${accountId}/destinations/${destination.id}/disable`, { reason: "Paused." })).json)
        .toEqual({ id: destination.id, outcome: "disabled" })
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations/${destination.id}`)).json)
        .toMatchObject({ state: "disabled", disabled_reason: "Paused." })
      expect((yield* admin("POST", `/v1/accounts/${accountId}/destinations/${destination.id}/enable`)).json)
        .toEqual({ id: destination.id, outcome: "enabled" })

      expect((yield* admin("DELETE", `/v1/accounts/${accountId}/destinations/${destination.id}`)).status).toBe(204)
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations/${destination.id}`)).status).toBe(404)
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations`)).json).toEqual({ items: [] })
    }))

  it.effect("The CLI's operations (remote mode) create, list, disable and remove through the same API, and show the API's refusal sentence", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId } = yield* accountWithKey()
      const operations = yield* DestinationOperations
      const refused = yield* Effect.flip(operations.create(accountId, { kind: "webhook", name: "Bad", event: "all", config: { url: "ftp://x.example" } }))
      expect(refused.message).toBe("The webhook URL must start with https://.")
      const created = yield* operations.create(accountId, { kind: "webhook", name: "CLI", event: "booking", config: { url: h.hooks.url("/cli") } })
      expect((yield* operations.list(accountId)).map((d) => d.id)).toEqual([created.id])
      expect(yield* operations.disable(accountId, created.id, Option.none())).toEqual({ id: created.id, outcome: "disabled" })
      yield* operations.remove(accountId, created.id)
      expect((yield* Effect.flip(operations.show(accountId, created.id))).message).toBe("No destination of this account has this id.")
    }).pipe(Effect.provide(Layer.unwrapEffect(Effect.map(Harness, (h) =>
      layerRemote(h.admin, Redacted.make(ADMIN_TOKEN)).pipe(Layer.provide(FetchHttpClient.layer)))))))
})
