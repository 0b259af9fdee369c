/**
 * LISTEN on one dedicated connection that comes back by itself. After any
 * error or end of that connection it reconnects (backoff from 50 ms, capped
 * at 1 s), to a primary only (a standby never hears the primary's NOTIFY),
 * LISTENs again to every channel still subscribed, and then sends `MISSED`
 * to every subscriber: a notification may have been lost while it was down,
 * so listeners poll at once. A check every few seconds drops a connection
 * that went silent or whose server became a standby.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Deferred, Duration, Effect, Mailbox, type Scope, Stream } from "effect"
import * as Pg from "pg"
import { STANDBY_CHECK, standbyOf } from "./pgFailures.js"

/** What a subscriber hears when notifications may have been missed: it should poll now. */
export const MISSED = "crm-relay:missed"

/** How often the listen connection proves it is alive and still on a primary. */
const CHECK_EVERY = Duration.seconds(5)
const MAX_BACKOFF_MS = 1_000

export interface Listener {
  /** Listens to `channel` for the scope: succeeds once the LISTEN is in effect (or its connection attempt failed). */
  readonly subscribe: (channel: string) => Effect.Effect<Stream.Stream<string, SqlError>, never, Scope.Scope>
}

type Subscriber = Mailbox.Mailbox<string, SqlError>

/**
 * A listener over connections from `open` (a connected client, not yet
 * checked), for the scope. It connects on its first subscription.
 */
export const make = (open: () => Promise<Pg.Client>): Effect.Effect<Listener, never, Scope.Scope> =>
  Effect.gen(function*() {
    const subscribers = new Map<string, Set<Subscriber>>()
    const lock = yield* Effect.makeSemaphore(1)
    let current: Pg.Client | undefined
    const listened = new Set<string>()
    // Completed after each connection attempt, success or not: a subscription waits for the next one when down.
    let attempt = yield* Deferred.make<void>()
    let started = false

    const query = (client: Pg.Client, text: string) =>
      Effect.tryPromise(() => client.query(text)).pipe(Effect.timeout(CHECK_EVERY))

    const deliver = (message: Pg.Notification) => {
      const payload = message.payload
      if (payload === undefined || payload === "") return
      for (const subscriber of subscribers.get(message.channel) ?? []) subscriber.unsafeOffer(payload)
    }

    const connectOnce = Effect.gen(function*() {
      const client = yield* Effect.tryPromise(() => open())
      const lost = yield* Deferred.make<void>()
      client.on("error", () => Deferred.unsafeDone(lost, Effect.void))
      client.on("end", () => Deferred.unsafeDone(lost, Effect.void))
      client.on("notification", deliver)
      const ready = Effect.gen(function*() {
        const checked = yield* query(client, STANDBY_CHECK)
        const standby = standbyOf(checked.rows[0])
        if (standby !== undefined) return yield* Effect.fail(standby)
        yield* lock.withPermits(1)(Effect.gen(function*() {
          const channels = Array.from(subscribers.keys())
          if (channels.length > 0) yield* query(client, channels.map((c) => `LISTEN ${Pg.escapeIdentifier(c)};`).join(" "))
          current = client
          listened.clear()
          for (const channel of channels) listened.add(channel)
        }))
      })
      yield* Effect.onError(ready, () => Effect.sync(() => client.end().catch(() => undefined)))
      return { client, lost }
    })

    const loop = Effect.gen(function*() {
      let failures = 0
      let before = false
      for (;;) {
        const connected = yield* Effect.either(connectOnce)
        const done = attempt
        attempt = yield* Deferred.make<void>()
        yield* Deferred.succeed(done, undefined)
        if (connected._tag === "Right") {
          const { client, lost } = connected.right
          failures = 0
          // Anything sent while down (or before a restart) may be lost: every subscriber polls now.
          if (before) for (const set of subscribers.values()) for (const subscriber of set) subscriber.unsafeOffer(MISSED)
          before = true
          const check = lock.withPermits(1)(query(client, STANDBY_CHECK)).pipe(
            Effect.flatMap((result) => standbyOf(result.rows[0]) === undefined ? Effect.void : Effect.fail("standby")),
            Effect.delay(CHECK_EVERY),
            Effect.forever
          )
          yield* Effect.raceFirst(Deferred.await(lost), Effect.ignore(check))
          yield* lock.withPermits(1)(Effect.sync(() => {
            current = undefined
            listened.clear()
          }))
          client.removeAllListeners("notification")
          yield* Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption(Duration.seconds(1)))
        } else {
          failures++
        }
        yield* Effect.sleep(Duration.millis(Math.min(50 * 2 ** Math.min(failures, 5), MAX_BACKOFF_MS)))
      }
    })

    // Forked in the listener's own scope: the loop lives as long as the Layer, not as its first subscriber.
    const scope = yield* Effect.scope
    const start = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      return Effect.asVoid(Effect.forkIn(Effect.withClock(loop, Clock.make()), scope))
    })

    const subscribe = (channel: string) =>
      Effect.gen(function*() {
        const mailbox = yield* Mailbox.make<string, SqlError>()
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const set = subscribers.get(channel) ?? new Set()
            set.add(mailbox)
            subscribers.set(channel, set)
          }),
          () =>
            lock.withPermits(1)(Effect.suspend(() => {
              const set = subscribers.get(channel)
              set?.delete(mailbox)
              if (set === undefined || set.size > 0) return Effect.void
              subscribers.delete(channel)
              if (current === undefined || !listened.delete(channel)) return Effect.void
              return Effect.ignore(query(current, `UNLISTEN ${Pg.escapeIdentifier(channel)}`))
            }))
        )
        yield* start
        const next = attempt
        const listening = yield* lock.withPermits(1)(Effect.suspend(() => {
          if (current === undefined) return Effect.succeed(false)
          if (listened.has(channel)) return Effect.succeed(true)
          const client = current
          return query(client, `LISTEN ${Pg.escapeIdentifier(channel)}`).pipe(
            Effect.tap(() => Effect.sync(() => listened.add(channel))),
            Effect.as(true),
            // A failed LISTEN means a failed connection: the loop sees it end, reconnects and LISTENs again.
            Effect.catchAll(() => Effect.sync(() => client.end().catch(() => undefined)).pipe(Effect.as(false)))
          )
        }))
        if (!listening) yield* Deferred.await(next)
        return Mailbox.toStream(mailbox)
      })

    return { subscribe }
  })
