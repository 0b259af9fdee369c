/**
 * LISTEN/NOTIFY wake-ups between replicas (for example "a job is due").
 *
 * `notify` is `pg_notify` through the caller's `SqlClient`, so inside a
 * transaction it is delivered only if and when that transaction commits.
 * `listen` uses PostgreSQL's LISTEN on a dedicated connection, or the PGlite
 * session's own notifications in process. Channels are namespaced by the
 * current schema, so databases sharing a server (test schemas) never wake
 * each other. A notification is a hint, not a queue: listeners must still
 * poll now and then (a dropped connection loses notifications). Payloads
 * must be non-empty (empty ones are not delivered).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Deferred, Duration, Effect, Fiber, Layer, Mailbox, Option, PubSub, type Scope, Stream } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { PgliteClient } from "./PgliteClient.js"

/** Sends and receives notifications on named channels. */
export class Notifier extends Context.Tag("@crm-relay/store/Notifier")<
  Notifier,
  {
    /** Notifies `channel` (transactional: sent at COMMIT when inside a transaction). */
    readonly notify: (channel: string, payload: string) => Effect.Effect<void, SqlError>
    /** The payloads sent to `channel` from now on (by any replica). */
    readonly listen: (channel: string) => Stream.Stream<string, SqlError>
    /**
     * Listens to `channel` for the scope: succeeds once the LISTEN is in
     * effect, with the payloads sent from then on (`listen` is this, unwrapped).
     */
    readonly subscribe: (channel: string) => Effect.Effect<Stream.Stream<string, SqlError>, SqlError, Scope.Scope>
    /**
     * The database's name of `channel` (namespaced by schema), for a statement
     * that notifies with `pg_notify` itself (e.g. as part of an INSERT).
     */
    readonly channel: (channel: string) => string
  }
>() {}

/** PostgreSQL identifiers (and so channel names) hold at most 63 bytes. */
const MAX_CHANNEL_BYTES = 63

const namespaced = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ schema: string }>`SELECT current_schema() AS schema`
  const schema = rows[0]?.schema ?? "public"
  return (channel: string): string => {
    const full = `${schema}:${channel}`
    // A channel that does not fit is hashed rather than silently truncated by PostgreSQL.
    if (Buffer.byteLength(full) <= MAX_CHANNEL_BYTES) return full
    return `${schema.slice(0, 20)}:${createHash("sha256").update(full).digest("hex").slice(0, 40)}`
  }
})

const makeNotify = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const name = yield* namespaced
  return (channel: string, payload: string) =>
    sql`SELECT pg_notify(${name(channel)}, ${payload})`.pipe(Effect.asVoid, Effect.withSpan("Notifier.notify"))
})

/**
 * Payloads the PostgreSQL notifier sends to itself to learn that a LISTEN is
 * in effect; every replica's listener drops them.
 */
const SELF_PROBE = "crm-relay:listening:"

/** How long a probe of a new LISTEN may go unanswered before it is sent again. */
const PROBE_EVERY = Duration.millis(100)
/** After this the next channel starts listening even if no probe came back (the listener is still kept). */
const PROBE_GIVE_UP = Duration.seconds(5)

/**
 * Notifier over PostgreSQL: LISTEN on the client's dedicated listen
 * connection. That one connection is shared by every channel, and the
 * driver runs one query at a time on it: two LISTENs at once made it queue
 * the second behind the first, which pg 8 warns about at every start and
 * pg 9 refuses. So channels start listening one at a time, the next once a
 * probe notification sent on the channel has come back, which also proves
 * that the LISTEN took effect.
 */
export const layerPg: Layer.Layer<Notifier, SqlError, PgClient.PgClient | SqlClient.SqlClient> = Layer.effect(
  Notifier,
  Effect.gen(function*() {
    const pg = yield* PgClient.PgClient
    const name = yield* namespaced
    const notify = yield* makeNotify
    const oneAtATime = yield* Effect.makeSemaphore(1)

    const subscribe = (channel: string): Effect.Effect<Stream.Stream<string, SqlError>, SqlError, Scope.Scope> =>
      Effect.gen(function*() {
        const full = name(channel)
        const probe = `${SELF_PROBE}${randomBytes(8).toString("hex")}`
        const heard = yield* Deferred.make<void>()
        const mailbox = yield* Mailbox.make<string, SqlError>()
        yield* oneAtATime.withPermits(1)(
          Effect.gen(function*() {
            const listener = yield* pg.listen(full).pipe(
              Stream.runForEach((payload) =>
                payload === probe
                  ? Deferred.succeed(heard, undefined)
                  : payload.startsWith(SELF_PROBE)
                  ? Effect.void
                  : mailbox.offer(payload)
              ),
              Effect.exit,
              Effect.flatMap((exit) => mailbox.done(exit)),
              Effect.forkScoped
            )
            // Through `notify` (pg_notify): the driver's own NOTIFY sends its payload as a parameter, which PostgreSQL refuses.
            const poke = notify(channel, probe).pipe(
              Effect.zipRight(Deferred.await(heard).pipe(Effect.timeoutOption(PROBE_EVERY))),
              Effect.repeat({ until: Option.isSome }),
              Effect.timeoutOption(PROBE_GIVE_UP),
              Effect.ignore,
              // Real time, whatever clock the caller runs on: under a TestClock the retry would never come.
              Effect.withClock(Clock.make())
            )
            // A listener that fails (connection refused) ends the wait: its stream carries the error.
            yield* Effect.raceFirst(poke, Effect.ignore(Fiber.await(listener)))
          })
        )
        return Mailbox.toStream(mailbox)
      })

    return Notifier.of({ notify, listen: (channel) => Stream.unwrapScoped(subscribe(channel)), subscribe, channel: name })
  })
)

/**
 * Notifier over PGlite: the session LISTENs to each channel once (through
 * the serialized client) and fans its notifications out in process.
 */
export const layerPglite: Layer.Layer<Notifier, SqlError, PgliteClient | SqlClient.SqlClient> = Layer.scoped(
  Notifier,
  Effect.gen(function*() {
    const client = yield* PgliteClient
    const name = yield* namespaced
    const hub = yield* PubSub.unbounded<readonly [channel: string, payload: string]>()
    yield* client.onNotification((channel, payload) => {
      hub.unsafeOffer([channel, payload])
    })
    const listening = new Set<string>()
    const lock = yield* Effect.makeSemaphore(1)
    const ensureListening = (channel: string) =>
      lock.withPermits(1)(
        Effect.suspend(() =>
          listening.has(channel)
            ? Effect.void
            : client`LISTEN ${client(channel)}`.pipe(Effect.zipRight(Effect.sync(() => listening.add(channel))), Effect.asVoid)
        )
      )
    const subscribe = (channel: string) =>
      Effect.gen(function*() {
        const full = name(channel)
        // Subscribe before LISTEN so nothing sent after `listen` returns is missed.
        const queue = yield* PubSub.subscribe(hub)
        yield* ensureListening(full)
        return Stream.fromQueue(queue).pipe(
          // Empty payloads are dropped, as the PostgreSQL listener does.
          Stream.filter(([c, payload]) => c === full && payload !== ""),
          Stream.map(([, payload]) => payload)
        )
      })
    return Notifier.of({
      notify: yield* makeNotify,
      channel: name,
      listen: (channel) => Stream.unwrapScoped(subscribe(channel)),
      subscribe
    })
  })
)
