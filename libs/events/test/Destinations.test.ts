/**
 * An account's destinations end to end on a real database (PGlite, or
 * PostgreSQL with DATABASE_URL): created only after the kind's check,
 * credentials sealed in the Vault, events fanned out to them and delivered
 * by the same worker through their kind, the same lifecycle and test events
 * as REST hooks. Beside the real webhook kind, a recording kind (a fake is a
 * Layer) proves the worker dispatches by kind and hands over the unsealed
 * credentials.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Fiber, Layer, Option, Redacted, Schema } from "effect"
import { Webhook } from "standardwebhooks"
import * as Destination from "../src/Destination.js"
import { DestinationKinds } from "../src/DestinationKinds.js"
import { Destinations } from "../src/Destinations.js"
import * as DeliveryWorker from "../src/DeliveryWorker.js"
import { Fanout } from "../src/Fanout.js"
import { SigningSecrets } from "../src/SigningSecrets.js"
import { SubscriptionLifecycle } from "../src/SubscriptionLifecycle.js"
import { Subscriptions } from "../src/Subscriptions.js"
import * as WebhookDestination from "../src/WebhookDestination.js"
import * as Harness from "./support/DeliveryHarness.js"

/** What the recording kind was handed. */
const published: Array<Destination.Message> = []

/** A kind that records what it publishes; its check wants the credentials `{"password":"right"}`. */
const RecordingKind = Layer.succeed(
  Destination.Destination,
  Destination.make({
    kind: "recording",
    config: Schema.Struct({ url: Schema.String.pipe(Schema.startsWith("recording://")), queue: Schema.String }),
    publish: (message) =>
      Effect.sync(() => {
        published.push(message)
        return Destination.Outcome.Delivered({ statusCode: null })
      }),
    check: (target) =>
      Option.match(target.credentials, {
        onNone: () => Effect.fail(new Destination.DestinationRefused({ reason: "auth", message: "The broker wants credentials." })),
        onSome: (c) =>
          JSON.parse(Redacted.value(c)).password === "right"
            ? Effect.void
            : Effect.fail(new Destination.DestinationRefused({ reason: "auth", message: "The broker refused these credentials." }))
      })
  })
)

const Kinds = DestinationKinds.layerOf(WebhookDestination.registered, DestinationKinds.register(RecordingKind))

const TestLayer = Layer.mergeAll(Destinations.Default, Kinds).pipe(
  Layer.provide(Kinds),
  Layer.provideMerge(Harness.layer)
)

const right = Option.some(Redacted.make(JSON.stringify({ password: "right" })))

const countDestinations = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM destinations`.pipe(Effect.map((rows) => rows[0]!.n), Effect.orDie))

/** Runs `body` beside a delivery worker serving the test's kinds. */
const withKindsWorker = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const worker = yield* DeliveryWorker.runWithKinds({ pollInterval: Duration.millis(100) }).pipe(Effect.fork)
    return yield* body.pipe(Effect.ensuring(Fiber.interrupt(worker)))
  })

layer(TestLayer, { excludeTestServices: true })("Destinations", (it) => {
  it.effect("Bad input: an unknown kind, a configuration the kind's Schema rejects, a webhook URL that is not https, wrong credentials → a refusal with one sentence, nothing stored", () =>
    Effect.gen(function*() {
      const destinations = yield* Destinations
      const account = yield* Harness.account()
      const before = yield* countDestinations
      const attempt = (kind: string, config: unknown, credentials = right) =>
        Effect.flip(destinations.create({ accountId: account.id, kind, name: "Ours", event: "all", config, credentials }))
      const refusals = [
        yield* attempt("carrier-pigeon", { url: "https://x.example" }),
        yield* attempt("recording", { url: "amqp://wrong-scheme", queue: "leads" }),
        yield* attempt("webhook", { url: "http://receiver.example/hook" }),
        yield* attempt("recording", { url: "recording://broker.example", queue: "leads" }, Option.some(Redacted.make("{\"password\":\"wrong\"}")))
      ]
      expect(refusals.map((r) => r._tag === "DestinationRefused" ? [r.reason, r.message.split(": ")[0]] : r._tag)).toEqual([
        ["unknown_kind", "The destination kind must be one of \"webhook\", \"recording\"."],
        ["invalid_config", "The recording destination's configuration is not valid"],
        ["invalid_config", "The webhook URL must start with https://."],
        ["auth", "The broker refused these credentials."]
      ])
      expect(yield* countDestinations).toBe(before)
    }))

  it.effect("A lead reaches the account's destination through its kind beside its REST hook: the message carries the delivery id and verifying Standard Webhooks headers, the credentials arrive unsealed, the attempt is logged, and the fair-share key is the destination's host", () =>
    Effect.gen(function*() {
      const destinations = yield* Destinations
      const { main } = yield* Harness.Receivers
      const account = yield* Harness.account()
      yield* account.subscribe(main.url("/rest-hook", "receiver.localhost"))
      const created = yield* destinations.create({
        accountId: account.id,
        kind: "recording",
        name: "Leads queue",
        event: "lead",
        config: { url: "recording://broker.example:5671", queue: "leads" },
        credentials: right
      })
      expect(created).toMatchObject({ kind: "recording", name: "Leads queue", event: "lead", has_credentials: true, disabled_at: null })
      expect(JSON.stringify(created)).not.toContain("right")
      // Sealed: the password is nowhere in the database as text.
      const sql = yield* SqlClient.SqlClient
      const leaked = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM destinations AS d
        JOIN vault_secrets AS v ON v.id = d.credentials_secret_id WHERE d.id = ${created.id}
          AND (d.config::text LIKE '%right%' OR encode(v.ciphertext, 'escape') LIKE '%right%')`
      expect(leaked[0]!.n).toBe(0)

      const ids = yield* Harness.lead(account.id)
      expect(ids).toHaveLength(2)
      yield* withKindsWorker(Harness.eventually(Effect.gen(function*() {
        const rows = yield* Effect.forEach(ids, Harness.row)
        return rows.every((r) => r.status === "delivered")
      })))
      const toDestination = published.filter((m) => ids.includes(m.id))
      expect(toDestination).toHaveLength(1)
      const message = toDestination[0]!
      expect(Redacted.value(Option.getOrThrow(message.target.credentials))).toBe("{\"password\":\"right\"}")
      expect(message.target.config).toEqual({ url: "recording://broker.example:5671", queue: "leads" })
      expect(message.headers["webhook-id"]).toBe(message.id)
      const secret = Redacted.value(yield* (yield* SigningSecrets).get(account.id))
      expect(new Webhook(secret).verify(message.body, { ...message.headers })).toMatchObject({ event: "lead", id: message.id })
      expect(main.received("/rest-hook")).toHaveLength(1)
      const logged = yield* Harness.attempts(message.id)
      expect(logged.map((a) => [a.attempt, a.result])).toEqual([[1, "delivered"]])
      const origin = yield* sql<{ target_origin: string }>`SELECT target_origin FROM deliveries WHERE id = ${message.id}`
      expect(origin[0]!.target_origin).toBe("recording://broker.example:5671")
    }))

  it.effect("The same lifecycle as REST hooks: a disabled destination is sent nothing new, enable brings it back, a test event goes through its kind, a removed one is gone from the list and receives nothing; the public unsubscribe cannot remove it", () =>
    Effect.gen(function*() {
      const destinations = yield* Destinations
      const lifecycle = yield* SubscriptionLifecycle
      const account = yield* Harness.account()
      const created = yield* destinations.create({
        accountId: account.id,
        kind: "recording",
        name: "Bookings",
        event: "all",
        config: { url: "recording://other.example", queue: "all" },
        credentials: right
      })
      expect(yield* (yield* Subscriptions).remove(account.id, created.subscription_id)).toBe(false)
      expect(yield* lifecycle.disable(account.id, created.subscription_id, "Paused by the owner.")).toBe("disabled")
      expect((yield* destinations.find(account.id, created.id)).disabled_reason).toBe("Paused by the owner.")
      expect(yield* Harness.lead(account.id)).toHaveLength(0)
      expect(yield* lifecycle.enable(account.id, created.subscription_id)).toBe("enabled")
      const [testId] = Option.toArray(yield* (yield* Fanout).test(account.id, created.subscription_id))
      yield* withKindsWorker(Harness.eventually(Effect.map(Harness.row(testId!), (r) => r.status === "delivered")))
      expect(published.some((m) => m.id === testId)).toBe(true)
      yield* destinations.remove(account.id, created.id)
      expect(yield* destinations.list(account.id)).toEqual([])
      expect(yield* Harness.lead(account.id)).toHaveLength(0)
      expect((yield* Effect.flip(destinations.find(account.id, created.id)))._tag).toBe("DestinationNotFound")
    }))
})

describe("Destinations without their kind", () => {
  layer(TestLayer, { excludeTestServices: true })("a worker that does not serve the kind", (it) => {
    it.effect("fails the delivery at once with a sentence, sending nothing", () =>
      Effect.gen(function*() {
        const destinations = yield* Destinations
        const account = yield* Harness.account()
        yield* destinations.create({
          accountId: account.id,
          kind: "recording",
          name: "Elsewhere",
          event: "lead",
          config: { url: "recording://elsewhere.example", queue: "q" },
          credentials: right
        })
        const [id] = yield* Harness.lead(account.id)
        // The webhook-only worker: its registry has no "recording" kind.
        const worker = yield* DeliveryWorker.run({ pollInterval: Duration.millis(100) }).pipe(Effect.fork)
        yield* Harness.eventually(Effect.map(Harness.attempts(id!), (a) => a.length >= 1)).pipe(Effect.ensuring(Fiber.interrupt(worker)))
        const [attempt] = yield* Harness.attempts(id!)
        expect(attempt).toMatchObject({ error_class: "destination_unavailable", result: "failed" })
        expect(attempt!.error).toBe("The destination kind must be one of \"webhook\".")
      }))
  })
})
