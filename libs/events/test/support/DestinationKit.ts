/**
 * The shared test kit of destination kinds: every `Destination` Layer runs
 * through the same behaviour, and a new kind is done when it passes.
 *
 * A kind's test file provides its Layer and a `DestinationFixture` (real
 * targets: an HTTPS receiver on loopback, a broker started on a loopback
 * port…) and calls `suite("<kind>", layer)`. The kit publishes signed
 * messages the way the delivery worker does and checks what arrived:
 *
 * - delivered: the message arrives once, with its id, its exact body and
 *   Standard Webhooks headers that verify;
 * - transient: a target that cannot take it now is Transient, with a class
 *   and a sentence;
 * - permanent: a target that can never take it is Permanent, nothing arrives;
 *   a stored configuration that no longer decodes is Permanent too, and
 *   refused by `check`;
 * - redelivery keeps the id: after a transient failure and after a
 *   duplicate attempt, whatever arrived carries the one id;
 * - fair share: targets that never answer do not hold up another target of
 *   the same kind (the queue's own share per fairness key is the worker's);
 * - recovery (issue 40): through the delivery worker on a real database, a
 *   target unreachable for a while, its connections dropped, while events
 *   keep coming, is held and probed; back, everything arrives within
 *   seconds, each once, and while down its host got no more than the bound.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { DnsResolver, Egress } from "@crm-relay/bridge"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Context, Duration, Effect, Fiber, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { Eventually } from "@crm-relay/testing"
import { randomBytes, randomUUID } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { Accounts } from "../../src/Accounts.js"
import * as DeliveryWorker from "../../src/DeliveryWorker.js"
import { Destination, type DestinationService, type Message, type Outcome, type Target } from "../../src/Destination.js"
import { DestinationKinds } from "../../src/DestinationKinds.js"
import { Destinations } from "../../src/Destinations.js"
import * as Fanout from "../../src/Fanout.js"
import * as OriginHealth from "../../src/OriginHealth.js"
import { SigningSecrets } from "../../src/SigningSecrets.js"
import * as WebhookDestination from "../../src/WebhookDestination.js"
import * as WebhookSigner from "../../src/WebhookSigner.js"
import { leadEvent } from "./Fixtures.js"

/** A message as it arrived at a target. */
export interface Arrived {
  /** The message id as the target saw it (`webhook-id`, the AMQP `message-id`, `Nats-Msg-Id`). */
  readonly id: string
  /** The headers it carried (HTTP or message headers), names lower-case. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** Fresh targets for one test of the kit. */
export interface KitTargets {
  /** Takes every message. */
  readonly accepting: Target
  /** Cannot take a message now (a 503, a stopped broker): Transient. */
  readonly transient: Target
  /** Can never take a message (an address egress refuses, an unroutable message): Permanent. */
  readonly permanent: Target
  /** Connects and never answers (within the test). */
  readonly silent: Target
  /** Transient until `heal` runs, then accepting. */
  readonly flaky: { readonly target: Target; readonly heal: Effect.Effect<void> }
  /**
   * Accepting, through a gate: `down` drops its connections and every new one (the host gone from the
   * network), `up` lets them through again.
   */
  readonly outage: { readonly target: Target; readonly down: Effect.Effect<void>; readonly up: Effect.Effect<void> }
  /** What arrived at `target` so far, in order. */
  readonly arrived: (target: Target) => Effect.Effect<ReadonlyArray<Arrived>>
}

/** How the kit gets real targets of the kind under test. */
export class DestinationFixture extends Context.Tag("@crm-relay/events/test/DestinationFixture")<DestinationFixture, {
  /** Fresh targets (their own paths, queues or subjects) for one test. */
  readonly targets: Effect.Effect<KitTargets>
}>() {}

const secret = Redacted.make(`whsec_${randomBytes(32).toString("base64")}`)
const key = Effect.runSync(WebhookSigner.signingKey(secret))

/** A signed lead message to `target`, as the worker builds one (same id on every attempt, a new timestamp). */
export const message = (target: Target, id: string = randomUUID()): Message => {
  const body = JSON.stringify({ type: "lead.created", data: { id, name: "Ada Lovelace" } })
  return {
    id,
    accountId: "kit-account",
    body,
    headers: WebhookSigner.headers({ key, id, timestamp: Math.floor(Date.now() / 1000), body }),
    target
  }
}

/** Checks a message arrived intact: its id, its exact body, and a Standard Webhooks signature that verifies. */
export const expectIntact = (arrived: Arrived, sent: Message): void => {
  expect(arrived.id).toBe(sent.id)
  expect(arrived.body).toBe(sent.body)
  expect(arrived.headers["webhook-id"]).toBe(sent.id)
  const verified = new Webhook(Redacted.value(secret)).verify(arrived.body, {
    "webhook-id": arrived.headers["webhook-id"] ?? "",
    "webhook-timestamp": arrived.headers["webhook-timestamp"] ?? "",
    "webhook-signature": arrived.headers["webhook-signature"] ?? ""
  })
  expect(verified).toEqual(JSON.parse(sent.body))
}

const expectSentence = (outcome: Outcome) => {
  if (outcome._tag === "Delivered") return expect.fail(`expected a failure, got ${outcome._tag}`)
  expect(outcome.errorClass).toMatch(/^[a-z_]+$/)
  expect(outcome.error).toMatch(/^[A-Z].*\.$/)
}

const arrivedCount = (targets: KitTargets, target: Target, n: number) =>
  Eventually.eventually(Effect.map(targets.arrived(target), (arrived) => arrived.length >= n))

/** How long the recovery behaviour's target is down: long enough for its origin to be held and probed several times. */
const OUTAGE = Duration.seconds(20)

/** Issue 40: back, everything held arrives within this. */
const BACK_WITHIN = Duration.seconds(10)

/**
 * Issue 40's bound on what a host gets while down: a worker's share of one origin (32 slots) at the outage's
 * start, then two attempts per 5 s at most (the probes).
 */
const outageBound = (outage: Duration.Duration) => 32 + 2 * Math.ceil(Duration.toMillis(outage) / 5_000)

/**
 * What the recovery behaviour runs on: a fresh database, the services that create an account and a destination
 * and queue events, and a registry holding `destination` (and the webhook kind the worker also needs).
 */
const deliveryLayer = (destination: DestinationService) => {
  const own = DestinationKinds.register(Layer.succeed(Destination, destination))
  const kinds = destination.kind === WebhookDestination.KIND
    ? DestinationKinds.layerOf(own)
    : DestinationKinds.layerOf(
      own,
      WebhookDestination.registered.pipe(Layer.provide(Egress.layerWith().pipe(Layer.provide(DnsResolver.layerStatic({})))))
    )
  return Layer.mergeAll(Accounts.Default, Fanout.Fanout.Default, SigningSecrets.Default, Destinations.Default, kinds).pipe(
    Layer.provide(kinds),
    Layer.provideMerge(Vault.layerTest),
    Layer.provideMerge(TestDatabase.layer)
  )
}

/**
 * Issue 40 through the delivery worker: a destination up, then down for OUTAGE (its connections dropped) while an
 * event comes every second, then up again. Answers what happened, for the kit's test to check.
 */
const recovery = (destination: DestinationService, outage: KitTargets["outage"], arrived: KitTargets["arrived"]) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const account = yield* (yield* Accounts).create({ name: "Kit recovery", mode: "live" })
    yield* (yield* Destinations).create({
      accountId: account.id,
      kind: destination.kind,
      name: "Recovery",
      event: "lead",
      config: outage.target.config,
      credentials: outage.target.credentials
    }).pipe(Effect.orDie)
    const fanout = yield* Fanout.Fanout
    let calls = 0
    const event = sql.withTransaction(fanout.enqueue(leadEvent(account.id, `call-kit-recovery-${++calls}`))).pipe(
      Effect.map((ids) => ids[0]!),
      Effect.orDie
    )
    const delivered = (ids: ReadonlyArray<string>) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE id IN ${sql.in(ids)} AND status = 'delivered'`.pipe(
        Effect.map((rows) => rows[0]!.n === ids.length),
        Effect.orDie
      )
    const worker = yield* Effect.forkScoped(DeliveryWorker.runWithKinds().pipe(Logger.withMinimumLogLevel(LogLevel.Warning)))

    // Up: delivered, and the connection to the target is open when it drops.
    const before = [yield* event, yield* event]
    yield* Eventually.eventually(delivered(before))

    yield* outage.down
    const down = Date.now()
    const sent: Array<string> = []
    while (Date.now() < down + Duration.toMillis(OUTAGE)) {
      sent.push(yield* event)
      yield* Effect.sleep(Duration.seconds(1))
    }
    const [origin] = yield* sql<{ target_origin: string }>`SELECT target_origin FROM deliveries WHERE id = ${before[0]!}`.pipe(Effect.orDie)
    const heldWhileDown = (yield* Effect.orDie(OriginHealth.held)).some((h) => h.origin === origin!.target_origin)
    yield* outage.up
    const up = Date.now()
    yield* Eventually.eventually(delivered(sent), Duration.minutes(2))
    const [last] = yield* sql<{ at: Date }>`SELECT max(delivered_at) AS at FROM deliveries WHERE id IN ${sql.in(sent)}`.pipe(Effect.orDie)
    yield* Fiber.interrupt(worker)

    // The attempts begun while down: those logged, and the final ones their rows hold (finalAttempt).
    const [from, to] = [new Date(down), new Date(up)]
    const [counted] = yield* sql<{ n: number }>`SELECT
      (SELECT count(*) FROM delivery_attempts AS a JOIN deliveries AS d ON d.id = a.delivery_id
        WHERE d.account_id = ${account.id} AND a.started_at >= ${from} AND a.started_at < ${to})::int
      + (SELECT count(*) FROM deliveries AS d
        WHERE d.account_id = ${account.id} AND d.final_started_at >= ${from} AND d.final_started_at < ${to})::int AS n`.pipe(Effect.orDie)
    const ids = (yield* arrived(outage.target)).map((a) => a.id)
    return { sent: [...before, ...sent], arrivedIds: ids, heldWhileDown, attemptsWhileDown: counted!.n, backInMs: last!.at.getTime() - up, down, up }
  }).pipe(Effect.scoped, Effect.provide(deliveryLayer(destination)))

/**
 * Runs the kit against `kind` (a Layer providing the kind's `Destination` and its
 * `DestinationFixture`; it is built once for the suite and closed after it).
 */
export const suite = <E>(kind: string, kindLayer: Layer.Layer<Destination | DestinationFixture, E>) =>
  layer(kindLayer, { timeout: Duration.minutes(5), excludeTestServices: true })(`Destination kit: ${kind}`, (it) => {
    it.effect("delivered: the message arrives once with its id, its exact body and Standard Webhooks headers that verify", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const sent = message(targets.accepting)
        const outcome = yield* destination.publish(sent)
        expect(outcome._tag).toBe("Delivered")
        yield* arrivedCount(targets, targets.accepting, 1)
        const arrived = yield* targets.arrived(targets.accepting)
        expect(arrived).toHaveLength(1)
        expectIntact(arrived[0]!, sent)
        // What passes delivery passes the check made at creation.
        yield* destination.check(targets.accepting)
      }))

    it.effect("transient: a target that cannot take the message now answers Transient, with a class and a sentence", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const outcome = yield* destination.publish(message(targets.transient))
        expect(outcome._tag).toBe("Transient")
        expectSentence(outcome)
      }))

    it.effect("permanent: a target that can never take the message answers Permanent with the reason; nothing arrives", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const outcome = yield* destination.publish(message(targets.permanent))
        expect(outcome._tag).toBe("Permanent")
        expectSentence(outcome)
        expect(yield* targets.arrived(targets.permanent)).toHaveLength(0)
      }))

    it.effect("permanent: a stored configuration that does not decode is Permanent `invalid_config`, and refused by check with a sentence", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const broken: Target = { config: { unexpected: true }, credentials: Option.none() }
        const outcome = yield* destination.publish(message(broken))
        expect(outcome).toMatchObject({ _tag: "Permanent", errorClass: "invalid_config" })
        const refused = yield* Effect.flip(destination.check(broken))
        expect(refused.reason).toBe("invalid_config")
        expect(refused.message).toMatch(/^The .* configuration is not valid: .+/)
      }))

    it.effect("redelivery keeps the id: after a transient failure, then a duplicate attempt, whatever arrived carries the one id", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const { heal, target } = targets.flaky
        const id = randomUUID()
        expect((yield* destination.publish(message(target, id)))._tag).toBe("Transient")
        yield* heal
        const retried = message(target, id)
        expect((yield* destination.publish(retried))._tag).toBe("Delivered")
        // A lost lease sends the same delivery again: still the one id (a broker may drop it as a duplicate).
        expect((yield* destination.publish(message(target, id)))._tag).toBe("Delivered")
        yield* arrivedCount(targets, target, 1)
        const arrived = yield* targets.arrived(target)
        expect(new Set(arrived.map((a) => a.id))).toEqual(new Set([id]))
        expect(arrived.map((a) => a.body)).toContain(retried.body)
      }))

    it.effect("fair share: messages to a target that never answers do not hold up another target of the same kind", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const stuck = yield* Effect.forEach(
          [1, 2, 3, 4],
          () => Effect.fork(destination.publish(message(targets.silent))),
          { concurrency: "unbounded" }
        )
        const sent = message(targets.accepting)
        expect((yield* destination.publish(sent))._tag).toBe("Delivered")
        yield* arrivedCount(targets, targets.accepting, 1)
        expectIntact((yield* targets.arrived(targets.accepting))[0]!, sent)
        // The silent target's messages are all still waiting for an answer.
        for (const fiber of stuck) expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* Effect.forEach(stuck, Fiber.interrupt)
      }))

    it.effect("#40 back in seconds, quiet while down: a target unreachable for 20 s, its connections dropped, while events keep coming, is held; back, every event arrives within 10 s, each once; while down its host got at most 32 + 2 per 5 s attempts", () =>
      Effect.gen(function*() {
        const destination = yield* Destination
        const targets = yield* Effect.flatMap(DestinationFixture, (f) => f.targets)
        const seen = yield* recovery(destination, targets.outage, targets.arrived)
        expect(seen.heldWhileDown).toBe(true)
        expect(seen.backInMs).toBeLessThanOrEqual(Duration.toMillis(BACK_WITHIN))
        expect([...seen.arrivedIds].sort()).toEqual([...seen.sent].sort())
        expect(seen.attemptsWhileDown).toBeLessThanOrEqual(outageBound(OUTAGE))
        yield* Effect.logInfo("Recovery").pipe(Effect.annotateLogs({ kind, back_in_ms: seen.backInMs, attempts_while_down: seen.attemptsWhileDown }))
      }))
  })
