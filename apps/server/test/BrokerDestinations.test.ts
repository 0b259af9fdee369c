/**
 * RabbitMQ and NATS destinations end to end through the running server: created
 * through the internal API (checked first: a wrong password is refused with one
 * sentence, nothing stored), delivered by the real delivery queue to real private
 * brokers on loopback, and the faults the issue names: a stopped broker (retries
 * on the schedule, delivered after its restart, nothing lost), a restart
 * mid-burst (every event arrives, none under two ids) and an unroutable message
 * (a failed attempt with the broker's reason in the attempt log).
 */
import { expect, layer } from "@effect/vitest"
import type { DestinationView } from "@crm-relay/contract/Destinations"
import type { DeliveryDetail, DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { NatsServer, RabbitMqServer } from "@crm-relay/testing"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as amqp from "amqplib"
import { Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as Server from "../src/http/Server.js"
import { bridgeSide } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { accountWithKey, adminOf, harnessOver, layerServer, leadOutcome } from "./support/TestServer.js"

class Harness extends Context.Tag("test/BrokerDestinationsHarness")<Harness, {
  readonly admin: string
  readonly rabbit: RabbitMqServer.RabbitMqServer
  readonly nats: NatsServer.NatsServer
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const rabbit = yield* Effect.orDie(RabbitMqServer.start)
    const nats = yield* Effect.orDie(NatsServer.start)
    const server = yield* Layer.build(layerServer({ role: "all", bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
    return { admin: Context.get(server, Server.Listening).internalApi.url, rabbit, nats }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

/** A durable fanout exchange with one durable queue bound, both named `name`, on a fresh channel of the test's own. */
const exchangeWithQueue = (name: string) =>
  Effect.flatMap(Harness, ({ rabbit }) =>
    Effect.promise(async () => {
      const model = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
      model.on("error", () => {})
      const channel = await model.createChannel()
      await channel.assertExchange(name, "direct", { durable: true })
      await channel.assertQueue(name, { durable: true })
      await channel.bindQueue(name, name, "lead")
      await model.close()
    }))

/** Every message taken from `queue` so far (kept across calls). */
const taker = (queue: string) => {
  const taken: Array<{ readonly id: string; readonly signature: string; readonly body: string }> = []
  return Effect.flatMap(Harness, ({ rabbit }) =>
    Effect.promise(async () => {
      const model = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
      model.on("error", () => {})
      const channel = await model.createChannel()
      for (;;) {
        const got = await channel.get(queue, { noAck: true })
        if (got === false) break
        taken.push({
          id: String(got.properties.messageId),
          signature: String(got.properties.headers?.["webhook-signature"] ?? ""),
          body: got.content.toString("utf8")
        })
      }
      await model.close()
      return [...taken]
    }).pipe(Effect.orElseSucceed(() => [...taken])))
}

const createRabbit = (accountId: string, exchange: string, routingKey: string, password?: string) =>
  Effect.flatMap(Harness, ({ rabbit }) =>
    admin("POST", `/v1/accounts/${accountId}/destinations`, {
      kind: "rabbitmq",
      name: "Our queue",
      event: "lead",
      config: { url: rabbit.url, exchange, routing_key: routingKey },
      credentials: { username: rabbit.user, password: password ?? rabbit.password }
    }))

const deliveries = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries?limit=100`), (a) => (a.json as DeliveryPage).deliveries)

const detail = (id: string) => Effect.map(admin("GET", `/v1/deliveries/${id}`), (a) => a.json as DeliveryDetail)

const postLead = (accountId: string) => admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, leadOutcome(accountId))

layer(harness, { excludeTestServices: true, timeout: Duration.minutes(5) })("broker destinations through the server", (it) => {
  it.effect("Wrong password → refused at creation with one sentence, nothing stored; a missing exchange too", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      yield* exchangeWithQueue("refusals")
      const wrong = yield* createRabbit(accountId, "refusals", "lead", "not-the-password")
      expect(wrong.status).toBe(400)
      expect((wrong.json as { error: string }).error).toMatch(/^The RabbitMQ broker at 127\.0\.0\.1:\d+ refused the user .* \(wrong user name or password\)\.$/)
      const missing = yield* createRabbit(accountId, "absent", "lead")
      expect((missing.json as { error: string }).error).toMatch(/^The exchange absent does not exist on the RabbitMQ broker/)
      expect((yield* admin("GET", `/v1/accounts/${accountId}/destinations`)).json).toEqual({ items: [] })
    }))

  it.effect("A lead reaches a queue bound to the exchange with its delivery id and signature; a test event too; the unknown-kind sentence names the three kinds", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      yield* exchangeWithQueue("leads")
      const created = yield* createRabbit(accountId, "leads", "lead")
      expect(created.status).toBe(201)
      const destination = created.json as DestinationView
      expect(destination).toMatchObject({ kind: "rabbitmq", has_credentials: true, state: "active" })
      expect(JSON.stringify(destination)).not.toContain((yield* Harness).rabbit.password)
      expect((yield* postLead(accountId)).status).toBe(202)
      const take = taker("leads")
      const arrived = yield* eventually(take, (a) => a.length >= 1)
      const [delivery] = yield* deliveries(accountId)
      expect(arrived[0]).toMatchObject({ id: delivery!.id, signature: expect.stringMatching(/^v1,/) })
      const test = yield* admin("POST", `/v1/accounts/${accountId}/destinations/${destination.id}/test`)
      const testId = (test.json as { delivery_id: string }).delivery_id
      yield* eventually(take, (a) => a.some((m) => m.id === testId))
      const unknown = yield* admin("POST", `/v1/accounts/${accountId}/destinations`, { kind: "sqs", name: "x", config: { url: "https://x.example" } })
      expect((unknown.json as { error: string }).error).toBe("The destination kind must be one of \"webhook\", \"rabbitmq\", \"nats\".")
    }))

  it.effect("Broker stopped → the attempt fails and is retried on the schedule; after the restart it is delivered, nothing lost", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId } = yield* accountWithKey()
      yield* exchangeWithQueue("stopped")
      const take = taker("stopped")
      expect((yield* createRabbit(accountId, "stopped", "lead")).status).toBe(201)
      expect((yield* postLead(accountId)).status).toBe(202)
      yield* eventually(take, (a) => a.length >= 1)
      yield* h.rabbit.stop
      expect((yield* postLead(accountId)).status).toBe(202)
      const [during] = yield* eventually(deliveries(accountId), (d) => d.length >= 2 && (d[0]!.attempts ?? 0) >= 1)
      yield* Effect.orDie(h.rabbit.start)
      // A broker slower to start than the 5 s retry (a busy machine) makes attempt 2 fail too; then the
      // schedule's next wait is 5 minutes, and the test waits it out rather than betting on the start's speed.
      const arrived = yield* eventually(take, (a) => a.length >= 2, Duration.minutes(7))
      expect(arrived.map((m) => m.id)).toContain(during!.id)
      const delivered = yield* eventually(detail(during!.id), (d) => d.status === "delivered")
      const log = [...delivered.attempt_log].sort((a, b) => a.attempt - b.attempt)
      expect(log[0]).toMatchObject({ attempt: 1, result: "retry", status_code: null })
      expect(log[0]!.error).toMatch(/^[A-Z].*\.$/)
      expect(log.at(-1)).toMatchObject({ result: "delivered" })
      // On the schedule: the first retry waits its 5 s at least.
      expect(Date.parse(log[1]!.at) - Date.parse(log[0]!.at)).toBeGreaterThanOrEqual(4_000)
    }), 540_000)

  it.effect("Broker restarted mid-burst (the kept connection lost between its halves) → every event arrives, none under two ids", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId } = yield* accountWithKey()
      yield* exchangeWithQueue("burst")
      const take = taker("burst")
      expect((yield* createRabbit(accountId, "burst", "lead")).status).toBe(201)
      const burst = Effect.forEach(Array.from({ length: 10 }), () => postLead(accountId), { concurrency: 4, discard: true })
      yield* burst
      // The kept connection carried the first half; the restart takes it away under the second.
      yield* eventually(deliveries(accountId), (d) => d.length === 10 && d.every((x) => x.status === "delivered"))
      yield* h.rabbit.stop
      yield* Effect.orDie(h.rabbit.start)
      yield* burst
      const all = yield* eventually(deliveries(accountId), (d) => d.length === 20 && d.every((x) => x.status === "delivered"), Duration.minutes(3))
      const arrived = yield* eventually(take, (a) => new Set(a.map((m) => m.id)).size >= 20)
      expect(new Set(arrived.map((m) => m.id))).toEqual(new Set(all.map((d) => d.id)))
      // One event, one id: a body never arrives under a second id.
      const idsOfBody = new Map<string, Set<string>>()
      for (const m of arrived) idsOfBody.set(m.body, (idsOfBody.get(m.body) ?? new Set()).add(m.id))
      for (const ids of idsOfBody.values()) expect(ids.size).toBe(1)
    }))

  it.effect("Unroutable message → a failed attempt with the broker's reason in the attempt log", () =>
    Effect.gen(function*() {
      const { accountId } = yield* accountWithKey()
      yield* exchangeWithQueue("unroutable")
      expect((yield* createRabbit(accountId, "unroutable", "no-queue-here")).status).toBe(201)
      expect((yield* postLead(accountId)).status).toBe(202)
      const [failed] = yield* eventually(deliveries(accountId), (d) => d.length === 1 && d[0]!.status === "failed")
      const log = (yield* detail(failed!.id)).attempt_log
      expect(log).toHaveLength(1)
      expect(log[0]).toMatchObject({ result: "failed", error_class: "unroutable" })
      expect(log[0]!.error).toMatch(/^RabbitMQ could not route the message from exchange unroutable with routing key "no-queue-here" to any queue \(312 NO_ROUTE\)\.$/)
    }))

  it.effect("NATS: a lead reaches the JetStream stream with Nats-Msg-Id = the delivery id; a wrong password is refused at creation", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId } = yield* accountWithKey()
      const connection = yield* Effect.acquireRelease(
        Effect.promise(() => connect({ servers: `127.0.0.1:${h.nats.port}`, user: h.nats.user, pass: h.nats.password })),
        (c) => Effect.promise(() => c.close().catch(() => {}))
      )
      const jsm = yield* Effect.promise(() => jetstreamManager(connection))
      yield* Effect.promise(() => jsm.streams.add({ name: "CRM", subjects: ["crm.>"] }))
      const create = (password: string) =>
        admin("POST", `/v1/accounts/${accountId}/destinations`, {
          kind: "nats",
          name: "Our stream",
          event: "lead",
          config: { url: h.nats.url, subject: "crm.leads", stream: "CRM" },
          credentials: { user: h.nats.user, password }
        })
      const wrong = yield* create("not-it")
      expect(wrong.status).toBe(400)
      expect((wrong.json as { error: string }).error).toMatch(/^The NATS server at 127\.0\.0\.1:\d+ refused the credentials/)
      expect((yield* create(h.nats.password)).status).toBe(201)
      expect((yield* postLead(accountId)).status).toBe(202)
      const [delivery] = yield* eventually(deliveries(accountId), (d) => d.length === 1 && d[0]!.status === "delivered")
      const stored = yield* Effect.promise(() => jsm.streams.getMessage("CRM", { last_by_subj: "crm.leads" }))
      expect(stored?.header.get("Nats-Msg-Id")).toBe(delivery!.id)
      expect(stored?.header.get("webhook-signature")).toMatch(/^v1,/)
    }).pipe(Effect.scoped))
})
