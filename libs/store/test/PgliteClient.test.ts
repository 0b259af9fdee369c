import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as PgliteClient from "../src/PgliteClient.js"
import * as TestDatabase from "../src/TestDatabase.js"

layer(TestDatabase.layerPglite, { excludeTestServices: true })("PgliteClient: one session, serialized by one permit", (it) => {
  it.effect("JSON parameters via client.json compile as on PostgreSQL", () =>
    Effect.gen(function*() {
      const client = yield* PgliteClient.PgliteClient
      const rows = yield* client<{ doc: unknown }>`SELECT ${client.json({ a: [1, { b: "c" }] })}::jsonb AS doc`
      expect(rows).toEqual([{ doc: { a: [1, { b: "c" }] } }])
    }))

  it.effect("concurrent read-modify-write transactions never interleave (each holds the permit until COMMIT)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TEMP TABLE counter (n int4 NOT NULL)`
      yield* sql`INSERT INTO counter VALUES (0)`
      const bump = sql.withTransaction(
        Effect.gen(function*() {
          const [row] = yield* sql<{ n: number }>`SELECT n FROM counter`
          yield* Effect.yieldNow()
          yield* sql`UPDATE counter SET n = ${row!.n + 1}`
        })
      )
      yield* Effect.all(Array.from({ length: 50 }, () => bump), { concurrency: "unbounded" })
      const [row] = yield* sql<{ n: number }>`SELECT n FROM counter`
      expect(row!.n).toBe(50)
    }))

  it.effect("a statement outside waits for an open transaction and then sees its commit, not its uncommitted rows", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TEMP TABLE seen (v text)`
      const inside = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const tx = yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO seen VALUES ('committed')`
          yield* Deferred.succeed(inside, undefined)
          yield* Deferred.await(release)
        })
      ).pipe(Effect.fork)
      yield* Deferred.await(inside)
      const reader = yield* sql<{ v: string }>`SELECT v FROM seen`.pipe(Effect.fork)
      yield* Effect.sleep("20 millis")
      // The reader is blocked on the permit while the transaction is open.
      expect(reader.unsafePoll()).toBeNull()
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(tx)
      expect(yield* Fiber.join(reader)).toEqual([{ v: "committed" }])
    }))

  it.effect("statements run concurrently inside a transaction use its connection and do not deadlock", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const results = yield* sql.withTransaction(
        Effect.all(Array.from({ length: 10 }, (_, i) => sql<{ i: number }>`SELECT ${i}::int4 AS i`), {
          concurrency: "unbounded"
        })
      )
      expect(results.map((rows) => rows[0]!.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    }))

  it.effect("a failed transaction rolls back; a failed nested transaction rolls back to its savepoint only", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TEMP TABLE nested (v text)`
      const failed = yield* sql.withTransaction(
        Effect.zipRight(sql`INSERT INTO nested VALUES ('outer-failed')`, Effect.fail("boom"))
      ).pipe(Effect.exit)
      expect(Exit.isFailure(failed)).toBe(true)
      yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO nested VALUES ('outer')`
          yield* sql.withTransaction(
            Effect.zipRight(sql`INSERT INTO nested VALUES ('inner')`, Effect.fail("inner boom"))
          ).pipe(Effect.ignore)
        })
      )
      const rows = yield* sql<{ v: string }>`SELECT v FROM nested ORDER BY v`
      expect(rows).toEqual([{ v: "outer" }])
    }))

  it.effect("a SQL error is a SqlError and leaves the session usable", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const error = yield* sql`SELECT 1 / 0`.pipe(Effect.flip)
      expect(error._tag).toBe("SqlError")
      expect(yield* sql`SELECT 1 AS ok`).toEqual([{ ok: 1 }])
    }))
})
