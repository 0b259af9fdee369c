import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Effect, Fiber, Stream } from "effect"
import { Notifier } from "../src/Notifier.js"
import * as TestDatabase from "../src/TestDatabase.js"

/** Collects what `channel` receives during `during`, then a short grace period. */
const collect = <E, R>(channel: string, during: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const notifier = yield* Notifier
    const fiber = yield* notifier.listen(channel).pipe(
      Stream.interruptWhen(Effect.sleep("1500 millis")),
      Stream.runCollect,
      Effect.fork
    )
    // Let LISTEN take effect before sending.
    yield* Effect.sleep("200 millis")
    yield* during
    return Chunk.toReadonlyArray(yield* Fiber.join(fiber))
  })

layer(TestDatabase.layer, { excludeTestServices: true })("Notifier", (it) => {
  it.effect("a notification reaches a listener of the same channel, not of another", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const other = yield* collect("other", Effect.void).pipe(Effect.fork)
      const got = yield* collect("jobs", notifier.notify("jobs", "job-1"))
      expect(got).toEqual(["job-1"])
      expect(yield* Fiber.join(other)).toEqual([])
    }))

  it.effect("notify is transactional: sent on COMMIT, never on ROLLBACK", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const sql = yield* SqlClient.SqlClient
      const got = yield* collect(
        "tx",
        Effect.gen(function*() {
          yield* sql.withTransaction(Effect.zipRight(notifier.notify("tx", "rolled-back"), Effect.fail("no")))
            .pipe(Effect.ignore)
          yield* sql.withTransaction(notifier.notify("tx", "committed"))
        })
      )
      expect(got).toEqual(["committed"])
    }))
})
