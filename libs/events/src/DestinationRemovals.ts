/**
 * A removed destination, told to every replica. The process that removes a
 * destination (the API, the CLI) is seldom the one holding what the
 * destination uses: the delivery worker keeps a broker connection per
 * destination, in this process under its own instance of the kinds, or in
 * another replica. So `Destinations.remove` announces the id on the
 * Notifier (sent when its transaction commits: LISTEN/NOTIFY on PostgreSQL,
 * in process on PGlite) and each holder `watch`es and lets go at once.
 * Notifications are hints a dropped listen connection can lose, so `watch`
 * also asks the database now and then which of the ids it holds were removed,
 * and at once when the Notifier says notifications may have been missed.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Notifier } from "@crm-relay/store"
import { Clock, Duration, Effect, Queue, Schedule, type Scope, Stream } from "effect"

/** The Notifier channel of removed destinations; the payload is the destination id. */
export const CHANNEL = "destination-removed"

/** The least time between two checks `MISSED` triggers (it comes with every write when the notifier polls). */
const MISSED_CHECK_GAP = Duration.seconds(1)

/** How often `watch` asks the database, behind the notifications (default). */
export const DEFAULT_RECHECK = Duration.seconds(30)

/** Announces that destination `id` is removed (inside a transaction: at its commit). */
export const announce = (id: string) => Effect.flatMap(Notifier.Notifier, (notifier) => notifier.notify(CHANNEL, id))

/**
 * Runs `release` for every removed destination among `held()`, for the scope: on each
 * announcement, and every `recheck` for those removed unheard. Succeeds once listening is in
 * effect, so a removal committed after it returns is heard.
 */
export const watch = (
  held: () => ReadonlyArray<string>,
  release: (id: string) => Effect.Effect<void>,
  recheck: Duration.DurationInput = DEFAULT_RECHECK
): Effect.Effect<void, never, Notifier.Notifier | SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const notifier = yield* Notifier.Notifier
    const sql = yield* SqlClient.SqlClient
    // Real time whatever clock the caller runs on: a TestClock moved by years must not replay rechecks.
    const live = Clock.make()
    // Listening again after its connection failed (the rechecks cover the gap).
    const relisten = notifier.listen(CHANNEL).pipe(
      Stream.retry(Schedule.spaced(Duration.seconds(1))),
      Stream.forever,
      Stream.catchAll(() => Stream.empty)
    )
    const first = yield* notifier.subscribe(CHANNEL).pipe(
      Effect.map(Stream.catchAll(() => Stream.empty)),
      Effect.orElseSucceed(() => Stream.empty)
    )
    // Notifications may have been missed (MISSED): the database is asked at once, at most once a second.
    const missed = yield* Queue.sliding<void>(1)
    yield* first.pipe(
      Stream.concat(relisten),
      // A broker that went silent makes a release wait for its bound: the next removals are not held up by it.
      Stream.mapEffect((id) => id === Notifier.MISSED ? missed.offer(void 0) : release(id), { concurrency: 16, unordered: true }),
      Stream.runDrain,
      Effect.withClock(live),
      Effect.forkScoped
    )
    const removedAmongHeld = Effect.suspend(() => {
      const ids = held()
      if (ids.length === 0) return Effect.void
      return sql<{ id: string }>`SELECT id FROM destinations WHERE removed_at IS NOT NULL AND id IN ${sql.in(ids)}`.pipe(
        Effect.flatMap((rows) => Effect.forEach(rows, (row) => release(row.id), { concurrency: 16, discard: true })),
        Effect.catchAllCause((cause) => Effect.logWarning("Could not read which destinations were removed", cause))
      )
    })
    yield* removedAmongHeld.pipe(
      Effect.delay(recheck),
      Effect.forever,
      Effect.withClock(live),
      Effect.forkScoped
    )
    yield* missed.take.pipe(
      Effect.zipRight(removedAmongHeld),
      Effect.zipRight(Effect.sleep(MISSED_CHECK_GAP)),
      Effect.forever,
      Effect.withClock(live),
      Effect.forkScoped
    )
  })
