/**
 * One account's broker silent → the others keep their latency, through the
 * running server: account A's RabbitMQ destination points at a listener that
 * answered its creation check (it forwarded to the real broker then) and has
 * since gone silent (accepts TCP, never answers); account B's points at a
 * real private RabbitMQ on loopback. B's deliveries are timed from the call
 * outcome accepted to the message arriving in B's queue, first without A,
 * then behind a backlog of A's events; the bound on the second is the first
 * run's own figures, never a guess at the machine's speed. A's deliveries
 * fail with the timeout in the attempt log, and A's broker host is then held
 * (one probe at a time) rather than each delivery retried on its own schedule.
 */
import { expect, layer } from "@effect/vitest"
import type { DeliveryDetail, DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { RabbitMqServer, SilentListener } from "@crm-relay/testing"
import * as amqp from "amqplib"
import { Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as Server from "../src/http/Server.js"
import { bridgeSide } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { accountWithKey, adminOf, harnessOver, layerServer, leadOutcome } from "./support/TestServer.js"

class Harness extends Context.Tag("test/SilentBrokerHarness")<Harness, {
  readonly admin: string
  readonly rabbit: RabbitMqServer.RabbitMqServer
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const rabbit = yield* Effect.orDie(RabbitMqServer.start)
    const server = yield* Layer.build(layerServer({ role: "all", bridge: bridgeSide([tls.ca]) })).pipe(Effect.orDie)
    return { admin: Context.get(server, Server.Listening).internalApi.url, rabbit }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

/** A client of the test's own on the broker: the exchange and queue `name`, and the arrival time of each message taken from it. */
const queueWatch = (name: string) =>
  Effect.flatMap(Harness, ({ rabbit }) =>
    Effect.acquireRelease(
      Effect.promise(async () => {
        const model = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
        model.on("error", () => {})
        const channel = await model.createChannel()
        await channel.assertExchange(name, "direct", { durable: true })
        await channel.assertQueue(name, { durable: true })
        await channel.bindQueue(name, name, "lead")
        let arrived = 0
        let waiting: (() => void) | undefined
        await channel.consume(name, () => {
          arrived++
          waiting?.()
        }, { noAck: true })
        return {
          model,
          /** Resolves once `n` messages have arrived in all. */
          arrivals: (n: number) =>
            new Promise<void>((resolve) => {
              if (arrived >= n) return resolve()
              waiting = () => {
                if (arrived >= n) {
                  waiting = undefined
                  resolve()
                }
              }
            })
        }
      }),
      ({ model }) => Effect.promise(() => model.close().catch(() => {}))
    ))

const createRabbit = (accountId: string, url: string, exchange: string) =>
  Effect.flatMap(Harness, ({ rabbit }) =>
    admin("POST", `/v1/accounts/${accountId}/destinations`, {
      kind: "rabbitmq",
      name: "Our queue",
      event: "lead",
      config: { url, exchange, routing_key: "lead" },
      credentials: { username: rabbit.user, password: rabbit.password }
    }))

const postLead = (accountId: string) => admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, leadOutcome(accountId))

const deliveries = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries?limit=100`), (a) => (a.json as DeliveryPage).deliveries)

const detail = (id: string) => Effect.map(admin("GET", `/v1/deliveries/${id}`), (a) => a.json as DeliveryDetail)

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** B's events one at a time: milliseconds from posting the call outcome to its message arriving in B's queue. */
const timedLeads = (accountId: string, watch: Effect.Effect.Success<ReturnType<typeof queueWatch>>, from: number, count: number) =>
  Effect.forEach(Array.from({ length: count }, (_, i) => from + i + 1), (n) =>
    Effect.gen(function*() {
      const started = performance.now()
      expect((yield* postLead(accountId)).status).toBe(202)
      yield* Effect.promise(() => watch.arrivals(n))
      return performance.now() - started
    }))

const SAMPLES = 9
const A_BACKLOG = 30

layer(harness, { excludeTestServices: true, timeout: Duration.minutes(5) })("a silent broker beside a healthy one", (it) => {
  it.scoped("One account's broker silent → others' deliveries keep their latency; the silent one's fail with a timeout reason and its broker host is held, probed one delivery at a time", () =>
    Effect.gen(function*() {
      const { rabbit } = yield* Harness
      const a = yield* accountWithKey()
      const b = yield* accountWithKey()
      yield* queueWatch("silent-a")
      const watchB = yield* queueWatch("healthy-b")
      // A's listener forwards to the broker while A's destination is created (its check must pass), then goes silent.
      const listener = yield* SilentListener.inFront(rabbit.port)
      expect((yield* createRabbit(a.accountId, `amqp://127.0.0.1:${listener.port}`, "silent-a")).status).toBe(201)
      expect((yield* createRabbit(b.accountId, rabbit.url, "healthy-b")).status).toBe(201)

      // B alone (the first delivery opens B's connection: a warm-up, not a sample).
      yield* timedLeads(b.accountId, watchB, 0, 1)
      const alone = yield* timedLeads(b.accountId, watchB, 1, SAMPLES)

      // A's broker goes silent with a backlog of A's events in the queue, every one waiting out its timeout.
      yield* listener.silence
      yield* Effect.forEach(Array.from({ length: A_BACKLOG }), () => postLead(a.accountId), { concurrency: 4, discard: true })
      yield* eventually(Effect.sync(() => listener.connections()), (n) => n >= 2)
      const behind = yield* timedLeads(b.accountId, watchB, 1 + SAMPLES, SAMPLES)

      // The bound comes from B's own run without A: the typical delivery behind A within three times the typical one alone
      // (and never below the slowest alone), where a B delivery queued behind A's would wait out A's 10 s timeout.
      const bound = Math.max(3 * median(alone), Math.max(...alone))
      expect(median(behind), `B alone: ${alone.map(Math.round).join(", ")} ms; behind A: ${behind.map(Math.round).join(", ")} ms`)
        .toBeLessThanOrEqual(bound)
      expect(Math.max(...behind)).toBeLessThan(10_000)

      // A's deliveries: the attempt log names the timeout, and A's broker host is held (issue 40): its deliveries wait
      // for one probe at a time instead of each retrying on its own schedule, and say so in the listing.
      const [first] = yield* eventually(deliveries(a.accountId), (d) => d.length === A_BACKLOG)
      const tried = yield* eventually(detail(first!.id), (d) => d.attempt_log.length >= 1, Duration.minutes(2))
      const log = [...tried.attempt_log].sort((x, y) => x.attempt - y.attempt)
      expect(log[0]).toMatchObject({ attempt: 1, result: "retry", error_class: "timeout", status_code: null })
      expect(log[0]!.error).toMatch(/^The RabbitMQ broker at 127\.0\.0\.1:\d+ did not complete the connection within 10 s\.$/)
      expect(tried.status).toBe("pending")
      const held = yield* eventually(deliveries(a.accountId), (d) => d.some((x) => x.held !== null), Duration.minutes(2))
      const sample = held.find((x) => x.held !== null)!
      expect(Date.parse(sample.held!.next_try_at)).toBeGreaterThan(Date.parse(sample.held!.failing_since))
    }))
})
