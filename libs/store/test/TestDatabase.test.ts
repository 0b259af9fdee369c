import { describe, expect, it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import * as TestDatabase from "../src/TestDatabase.js"

describe("TestDatabase: each test file gets an isolated, migrated database", () => {
  it.live("two databases are isolated from each other", () =>
    Effect.gen(function*() {
      const write = Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO accounts (name, mode) VALUES ('only-here', 'demo')`
        return yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM accounts`
      })
      const count = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int4 AS n FROM accounts`)
      expect(yield* write.pipe(Effect.provide(Layer.fresh(TestDatabase.layer)))).toEqual([{ n: 1 }])
      expect(yield* count.pipe(Effect.provide(Layer.fresh(TestDatabase.layer)))).toEqual([{ n: 0 }])
    }))

  it.live("on PostgreSQL: the URL's sessions use the test schema, which is dropped afterwards", () =>
    Effect.gen(function*() {
      const base = yield* Config.option(Config.redacted("DATABASE_URL"))
      const db = yield* TestDatabase.TestDatabase.pipe(Effect.provide(Layer.fresh(TestDatabase.layer)))
      if (db.kind === "pglite") {
        expect(Option.isNone(db.url)).toBe(true)
        return
      }
      const schema = Option.getOrThrow(db.schema)
      expect(Redacted.value(Option.getOrThrow(db.url))).toContain("search_path")
      const remaining = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql`SELECT 1 FROM information_schema.schemata WHERE schema_name = ${schema}`
      }).pipe(Effect.provide(PgClient.layer({ url: Option.getOrThrow(base) })))
      expect(remaining).toEqual([])
    }))

  it.live("on PostgreSQL: a second pool from TestDatabase.url sees the same data", () =>
    Effect.gen(function*() {
      const program = Effect.gen(function*() {
        const db = yield* TestDatabase.TestDatabase
        if (db.kind === "pglite") return "pglite"
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO accounts (name, mode) VALUES ('shared', 'live')`
        const other = yield* Effect.flatMap(
          SqlClient.SqlClient,
          (other) => other<{ name: string }>`SELECT name FROM accounts`
        ).pipe(Effect.provide(PgClient.layer({ url: Option.getOrThrow(db.url) })))
        return other.map((r) => r.name).join(",")
      })
      const result = yield* program.pipe(Effect.provide(Layer.fresh(TestDatabase.layer)))
      expect(["pglite", "shared"]).toContain(result)
    }))
})
