/**
 * LISTEN/NOTIFY wake-ups between replicas (for example "a job is due").
 *
 * `notify` is `pg_notify` through the caller's `SqlClient`, so inside a
 * transaction it is delivered only if and when that transaction commits.
 * `listen` uses PostgreSQL's LISTEN on a dedicated connection, or the PGlite
 * session's own notifications in process. Channels are namespaced by the
 * current schema, so databases sharing a server (test schemas) never wake
 * each other. A notification is a hint, not a queue: listeners must still
 * poll now and then, and at once on `MISSED` (a dropped connection loses
 * notifications; behind a transaction pooler only `MISSED` comes). Payloads
 * must be non-empty (empty ones are not delivered).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, PubSub, type Scope, Stream } from "effect"
import { createHash } from "node:crypto"
import { PgliteClient } from "./PgliteClient.js"
import * as PostgresClient from "./PostgresClient.js"

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
 * The payload a listener hears when notifications may have been missed (its
 * connection came back after a failure, or the notifier polls behind a
 * transaction pooler): it should look for work now, as on any wake-up.
 * Never sent on PGlite.
 */
export const MISSED = PostgresClient.MISSED

/**
 * Notifier over PostgreSQL: LISTEN on the client's dedicated listen
 * connection, which comes back by itself after a failure and then sends
 * `MISSED` (see PostgresClient). `subscribe` succeeds once its LISTEN is in
 * effect: what is sent next is heard.
 */
export const layerPg: Layer.Layer<Notifier, SqlError, PostgresClient.PostgresListen | SqlClient.SqlClient> = Layer.effect(
  Notifier,
  Effect.gen(function*() {
    const listener = yield* PostgresClient.PostgresListen
    const name = yield* namespaced
    const notify = yield* makeNotify
    const subscribe = (channel: string): Effect.Effect<Stream.Stream<string, SqlError>, SqlError, Scope.Scope> =>
      listener.subscribe(name(channel))
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
