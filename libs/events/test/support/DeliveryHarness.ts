/**
 * Everything a webhook delivery test needs: a migrated test database, the
 * Event API services, the Vault and signing secrets, the fan-out, and the
 * real safe egress toward real HTTPS receivers on loopback:
 *
 * - `receiver.localhost` / `second.localhost` → 127.0.0.1 (allowed, as
 *   EGRESS_ALLOW_PRIVATE would; the test CA trusted);
 * - `loopback.example` → 127.0.0.2 and `v6.example` → ::1, where receivers
 *   listen but egress must never connect (not allowed);
 * - `metadata.example` → 169.254.169.254 and `private.example` → 10.1.2.3.
 *
 * Egress is built on the live clock (its deadline bounds real I/O) with a
 * deadline no loaded machine reaches; a test that provokes a timeout
 * provides the short one (`withDeadline(TEST_DEADLINE)`) to its worker.
 */
import { DnsResolver, Egress } from "@crm-relay/bridge"
import { JobQueue, Notifier, TestDatabase, Vault } from "@crm-relay/store"
import { Certificate, Eventually, ListenProbe } from "@crm-relay/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Fiber, Layer, TestClock } from "effect"
import { Accounts } from "../../src/Accounts.js"
import * as DeliveriesModule from "../../src/Deliveries.js"
import { Deliveries } from "../../src/Deliveries.js"
import * as DeliveryWorker from "../../src/DeliveryWorker.js"
import * as Fanout from "../../src/Fanout.js"
import * as OriginHealth from "../../src/OriginHealth.js"
import { attemptsOf } from "../../src/internal/finalAttempt.js"
import { IntegrationKeys } from "../../src/IntegrationKeys.js"
import * as KeyTags from "../../src/KeyTags.js"
import { Preview } from "../../src/Preview.js"
import { Recoveries } from "../../src/Recoveries.js"
import { SigningSecrets } from "../../src/SigningSecrets.js"
import { SubscriptionLifecycle } from "../../src/SubscriptionLifecycle.js"
import { Subscriptions } from "../../src/Subscriptions.js"
import { leadEvent } from "./Fixtures.js"
import * as Receiver from "./Receiver.js"

/** The short egress deadline of tests that provoke a timeout: their receiver answers long after it. */
export const TEST_DEADLINE = Duration.millis(600)

/** The egress deadline of every other test: slow handshakes on a loaded machine must not turn into timeouts. */
export const PATIENT_DEADLINE = Duration.minutes(1)

/** The receivers of a test file. */
export class Receivers extends Context.Tag("test/Receivers")<Receivers, {
  /** Allowed: receiver.localhost / second.localhost on 127.0.0.1. */
  readonly main: Receiver.Receiver
  /** Allowed, another port (the target of redirects that must not be followed). */
  readonly second: Receiver.Receiver
  /** Not allowed: 127.0.0.2 (loopback.example) and ::1 (v6.example). */
  readonly loopback: Receiver.Receiver
  readonly ipv6: Receiver.Receiver
}>() {}

const tls = Effect.runSync(Effect.cached(Effect.orDie(Certificate.generateTlsMaterial({
  dnsNames: ["receiver.localhost", "second.localhost", "loopback.example", "v6.example"],
  ips: ["127.0.0.1", "127.0.0.2", "::1"]
}))))

const ReceiversLive = Layer.scoped(
  Receivers,
  Effect.gen(function*() {
    const material = yield* tls
    return {
      main: yield* Receiver.make(material, "127.0.0.1"),
      second: yield* Receiver.make(material, "127.0.0.1"),
      loopback: yield* Receiver.make(material, "127.0.0.2"),
      ipv6: yield* Receiver.make(material, "::1")
    }
  })
)

/** Another receiver on 127.0.0.1 (`receiver.localhost` / `second.localhost`): an origin of its own, closed with the scope. */
export const receiver = Effect.flatMap(tls, (material) => Receiver.make(material, "127.0.0.1"))

/** Builds `layer` on the live clock (TestClock jumps must not expire a real exchange). */
const onLiveClock = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.scopedContext(Effect.withClock(Layer.build(layer), Clock.make()))

const egress = (deadline: Duration.Duration) => Layer.unwrapEffect(
  Effect.map(tls, (material) =>
    Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: material.ca, deadline }).pipe(
      Layer.provide(DnsResolver.layerStatic({
        "receiver.localhost": ["127.0.0.1"],
        "second.localhost": ["127.0.0.1"],
        "loopback.example": ["127.0.0.2"],
        "v6.example": ["::1"],
        "metadata.example": ["169.254.169.254"],
        "private.example": ["10.1.2.3"]
      }))
    ))
).pipe(onLiveClock)

/** The services, the database, egress (with `deadline`) and receivers. */
export const layerWith = (deadline: Duration.Duration) => Layer.mergeAll(
  Accounts.Default,
  IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerTest)),
  Subscriptions.Default,
  Preview.Default,
  Deliveries.Default,
  Fanout.Fanout.Default,
  SigningSecrets.Default,
  SubscriptionLifecycle.Default,
  Recoveries.Default,
  egress(deadline),
  ReceiversLive
).pipe(Layer.provideMerge(Vault.layerTest), Layer.provideMerge(TestDatabase.layer))

/** The harness, its egress with the patient deadline. */
export const layer = layerWith(PATIENT_DEADLINE)

/** Runs `effect` (a worker) with egress of `deadline` instead of the harness's. */
export const withDeadline = (deadline: Duration.Duration) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, egress(deadline))

export { account, contact } from "./Fixtures.js"

let calls = 0

/** Fans a lead event out for `accountId` (in a transaction, as the pipeline does); returns the delivery ids. */
export const lead = (accountId: string, callId = `call-${++calls}`) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const fanout = yield* Fanout.Fanout
    return yield* sql.withTransaction(fanout.enqueue(leadEvent(accountId, callId))).pipe(Effect.orDie)
  })

/** A delivery row as stored. */
export interface Row {
  readonly id: string
  readonly status: string
  readonly attempts: number
  readonly next_attempt_at: Date
  readonly last_error: string | null
  readonly delivered_at: Date | null
  readonly body: string
}

export const row = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Row>`SELECT id, status, attempts, next_attempt_at, last_error, delivered_at, ${sql.literal(DeliveriesModule.bodySql)} AS body
      FROM deliveries WHERE id = ${id}`.pipe(Effect.map((rows) => rows[0]!), Effect.orDie))

/** The target URL of a delivery. */
export const targetOf = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ target_url: string }>`SELECT target_url FROM deliveries WHERE id = ${id}`.pipe(
      Effect.map((rows) => rows[0]!.target_url),
      Effect.orDie
    ))

/** A logged attempt. */
export interface AttemptRow {
  readonly attempt: number
  readonly started_at: Date
  readonly status_code: number | null
  readonly duration_ms: number
  readonly error_class: string | null
  readonly error: string | null
  readonly result: string
}

/** Every attempt of the delivery `id`, oldest first, as the operator reads them (logged ones, then the row's final one). */
export const attempts = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    attemptsOf(sql, id).pipe(Effect.map((rows) => rows as unknown as ReadonlyArray<AttemptRow>), Effect.orDie))

export const { eventually, pause } = Eventually

/** Sets the (shared) TestClock to at least the real time, and never back; answers that time. */
export const realisticNow = Effect.gen(function*() {
  const at = Math.max(yield* Clock.currentTimeMillis, Date.now()) + 1000
  yield* TestClock.setTime(at)
  return at
})

/** The row once its attempt count reached `n` and it is no longer leased (the attempt was stored). */
export const settled = (id: string, n: number) =>
  Effect.gen(function*() {
    yield* eventually(Effect.map(attempts(id), (logged) => logged.length >= n))
    return yield* row(id)
  })

/**
 * Runs `body` with a delivery worker (one-hour poll: only NOTIFY and due
 * times wake it), then stops it and fails whatever it left pending, so the
 * next test's worker never picks up this test's deliveries.
 */
export const withWorker = <A, E, R>(body: Effect.Effect<A, E, R>, options: DeliveryWorker.DeliveryWorkerOptions = {}) =>
  Effect.gen(function*() {
    const probe = ListenProbe.make()
    const worker = yield* DeliveryWorker.run({ pollInterval: Duration.hours(1), ...options }).pipe(
      Effect.provideServiceEffect(Notifier.Notifier, probed(probe)),
      Effect.fork
    )
    // Its LISTEN is live before the body runs: a notification sent before it would be missed until the poll.
    yield* probe.hears(wake)
    const result = yield* body.pipe(Effect.ensuring(Fiber.interrupt(worker)))
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE deliveries SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL
      WHERE status = 'pending'`.pipe(Effect.orDie)
    // The receivers' health goes with their deliveries: the next test starts with no origin failing.
    yield* sql`DELETE FROM origin_health`.pipe(Effect.orDie)
    return result
  })

/**
 * Worker options under which no origin is ever held (OriginHealth): for tests of one message's own retry
 * schedule with several messages failing on one receiver at once. The hold has tests of its own.
 */
export const ownSchedules: DeliveryWorker.DeliveryWorkerOptions = {
  probes: { ...OriginHealth.DEFAULT_PROBE_POLICY, threshold: 1_000_000 }
}

/** Wakes the delivery workers (as the fan-out does). */
export const wake = JobQueue.wake(DeliveriesModule.table)

/** The context's Notifier, its listeners tapped by `probe`. */
const probed = (probe: ListenProbe.ListenProbe) =>
  Effect.map(Notifier.Notifier, (notifier) =>
    Notifier.Notifier.of({
      notify: notifier.notify,
      channel: notifier.channel,
      listen: (channel) => probe.tap(notifier.listen(channel)),
      subscribe: (channel) => Effect.map(notifier.subscribe(channel), probe.tap)
    }))
