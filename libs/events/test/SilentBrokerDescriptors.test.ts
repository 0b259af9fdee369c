/**
 * A broker that accepts TCP and never answers, met by hundreds of connection
 * attempts each abandoned at a short timeout (an hour of a silent broker at
 * the default 10 s, compressed): every abandoned attempt's socket is closed,
 * so this process's open file descriptors (/proc/self/fd) come back to where
 * they were and the silent listener sees none of our connections still open.
 * For both publishers, through BrokerEgress with loopback allowed.
 */
import { expect, layer } from "@effect/vitest"
import { NatsConfig } from "@crm-relay/contract/Destinations/Nats"
import { RabbitmqConfig } from "@crm-relay/contract/Destinations/Rabbitmq"
import { Eventually, SilentListener } from "@crm-relay/testing"
import { Duration, Effect, Layer, Logger, LogLevel, Redacted, Schema } from "effect"
import * as Fs from "node:fs"
import type { BrokerMessage, PublishOutcome } from "../src/internal/brokers/BrokerMessage.js"
import * as AmqpPublisher from "../src/internal/brokers/AmqpPublisher.js"
import * as JetStreamPublisher from "../src/internal/brokers/JetStreamPublisher.js"
import { loopbackEgress, message, reason } from "./support/BrokerPublishers.js"

/** 360 attempts: one every 10 s for an hour, the default timeout's worth of a silent broker. */
const PUBLISHERS = 12
const ATTEMPTS_EACH = 30
const TIMEOUT_MS = 30
// Other things of the test process (the runner's pipes, a lazily opened file) may come and go meanwhile.
const SLACK = 8

const openFds = () => Fs.readdirSync("/proc/self/fd").length

/** Every publisher publishes `ATTEMPTS_EACH` times in turn (each publish a new connection attempt), the publishers side by side. */
const attempts = (publishers: ReadonlyArray<{ readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome> }>) =>
  Effect.forEach(
    publishers,
    (publisher) => Effect.forEach(Array.from({ length: ATTEMPTS_EACH }), () => publisher.publish(message())),
    { concurrency: "unbounded" }
  ).pipe(Effect.map((all) => all.flat()))

/** Our connections the listener still holds, and this process's descriptors beyond `before` (and the slack), once both settle or at the bound. */
const leftOver = (silent: { readonly open: () => number }, before: number) => {
  const now = () => ({ open: silent.open(), extraFds: Math.max(0, openFds() - before - SLACK) })
  return Eventually.eventually(Effect.sync(() => now().open === 0 && now().extraFds === 0), Duration.seconds(20)).pipe(
    Effect.catchAllDefect(() => Effect.void),
    Effect.map(now)
  )
}

layer(Layer.mergeAll(loopbackEgress, Logger.minimumLogLevel(LogLevel.None)), { excludeTestServices: true, timeout: Duration.minutes(3) })(
  "a silent broker",
  (it) => {
    it.scoped("A broker silent for an hour must not cost one file descriptor per attempt: RabbitMQ attempts abandoned at their timeout close their sockets", () =>
      Effect.gen(function*() {
        const silent = yield* SilentListener.start
        const config = Schema.decodeSync(RabbitmqConfig)({ url: `amqp://127.0.0.1:${silent.port}`, exchange: "crm.events", routing_key: "x" })
        const before = openFds()
        const publishers = yield* Effect.forEach(
          Array.from({ length: PUBLISHERS }),
          () => AmqpPublisher.make(config, { username: "guest", password: Redacted.make("guest") }, { timeoutMs: TIMEOUT_MS })
        )
        const outcomes = yield* attempts(publishers)
        expect(outcomes).toHaveLength(PUBLISHERS * ATTEMPTS_EACH)
        for (const outcome of outcomes) expect(reason(outcome)).toMatch(/did not complete the connection within/)
        // Each publisher reached the broker (on a loaded machine an attempt may time out before its socket even connects).
        expect(silent.connections()).toBeGreaterThanOrEqual(PUBLISHERS)
        expect(yield* leftOver(silent, before)).toEqual({ open: 0, extraFds: 0 })
      }))

    it.scoped("A broker silent for an hour must not cost one file descriptor per attempt: NATS attempts abandoned at their timeout close their sockets", () =>
      Effect.gen(function*() {
        const silent = yield* SilentListener.start
        const config = Schema.decodeSync(NatsConfig)({ url: `nats://127.0.0.1:${silent.port}`, subject: "crm.events" })
        const before = openFds()
        const publishers = yield* Effect.forEach(
          Array.from({ length: PUBLISHERS }),
          () => JetStreamPublisher.make(config, { _tag: "Token", token: Redacted.make("token") }, { timeoutMs: TIMEOUT_MS })
        )
        const outcomes = yield* attempts(publishers)
        expect(outcomes).toHaveLength(PUBLISHERS * ATTEMPTS_EACH)
        for (const outcome of outcomes) expect(reason(outcome)).toMatch(/did not answer in time/)
        // Each publisher reached the broker (on a loaded machine an attempt may time out before its socket even connects).
        expect(silent.connections()).toBeGreaterThanOrEqual(PUBLISHERS)
        expect(yield* leftOver(silent, before)).toEqual({ open: 0, extraFds: 0 })
      }))
  }
)
