import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import * as Database from "../src/Database.js"
import * as TestDatabase from "../src/TestDatabase.js"

// Each database this run can reach: PGlite always, PostgreSQL when DATABASE_URL is set.
const postgresUrl = Effect.runSync(
  Config.option(Config.redacted("DATABASE_URL")).pipe(
    Effect.map(Option.filter((url) => Redacted.value(url) !== "")),
    Effect.orElseSucceed(() => Option.none())
  )
)
const databases: ReadonlyArray<readonly [string, Layer.Layer<SqlClient.SqlClient>]> = [
  ["PGlite", TestDatabase.layerPglite],
  ...Option.match(postgresUrl, {
    onNone: () => [],
    onSome: (url) => [["PostgreSQL", Database.layerPostgres({ url, poolSize: 2 }).pipe(Layer.orDie)] as const]
  })
]

const expectedLiterals = {
  ts: new Date("2024-02-29T12:34:56.789Z"),
  ts_offset: new Date("2024-02-29T07:04:56.789Z"),
  big: "9007199254740993",
  num: "12345678901234567890.123",
  jb: { a: [1, "x", null], b: { c: true } },
  js: { k: 1 },
  bin: Buffer.from([0x00, 0xff, 0x10]),
  id: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
  flag: true,
  i4: 42,
  i2: 7,
  f8: 1.5,
  d: "2024-02-29",
  texts: ["a", "b c", null, "q\"uote"],
  bigs: ["1", "9007199254740993"],
  tss: [new Date("2024-01-01T00:00:00.000Z")],
  nothing: null
}

for (const [name, database] of databases) {
  describe(`value types on ${name}`, () => {
    it.layer(database)((it) => {
      it.effect("literals of every stored type read back as the documented JavaScript values", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql`SELECT
            '2024-02-29 12:34:56.789+00'::timestamptz AS ts,
            '2024-02-29 12:34:56.789+05:30'::timestamptz AS ts_offset,
            9007199254740993::int8 AS big,
            '12345678901234567890.123'::numeric AS num,
            '{"a":[1,"x",null],"b":{"c":true}}'::jsonb AS jb,
            '{"k":1}'::json AS js,
            '\\x00ff10'::bytea AS bin,
            'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS id,
            true AS flag, 42::int4 AS i4, 7::int2 AS i2, 1.5::float8 AS f8,
            '2024-02-29'::date AS d,
            ARRAY['a', 'b c', NULL, 'q"uote']::text[] AS texts,
            ARRAY[1, 9007199254740993]::int8[] AS bigs,
            ARRAY['2024-01-01T00:00:00Z'::timestamptz] AS tss,
            NULL::text AS nothing`
          expect(rows).toEqual([expectedLiterals])
          expect(Buffer.isBuffer(rows[0]!["bin"])).toBe(true)
        }))

      it.effect("parameters of every type round-trip through a table, with sql.insert and sql.in", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TEMP TABLE IF NOT EXISTS value_roundtrip (
            ts timestamptz, big int8, num numeric, doc jsonb, bin bytea, id uuid, flag bool, n int4, tags text[]
          )`
          yield* sql`DELETE FROM value_roundtrip`
          const row = {
            ts: new Date("2023-12-31T23:59:59.999Z"),
            big: 9007199254740993n,
            num: "0.10",
            doc: { nested: { list: [1, 2, 3] }, s: "é" },
            bin: Buffer.from("héllo"),
            id: "0f8fad5b-d9cb-469f-a165-70867728950e",
            flag: false,
            n: -5,
            tags: ["x", "y,z"]
          }
          yield* sql`INSERT INTO value_roundtrip ${sql.insert(row)}`
          const back = yield* sql`SELECT * FROM value_roundtrip WHERE id IN ${sql.in([row.id])}`
          expect(back).toEqual([{
            ts: row.ts,
            big: "9007199254740993",
            num: "0.10",
            doc: { nested: { list: [1, 2, 3] }, s: "é" },
            bin: Buffer.from("héllo"),
            id: row.id,
            flag: false,
            n: -5,
            tags: ["x", "y,z"]
          }])
        }))

      it.effect("timestamptz reads the same instant whatever the session time zone", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql.withTransaction(
            Effect.zipRight(
              sql`SET LOCAL TIME ZONE 'Asia/Kolkata'`,
              sql<{ t: Date }>`SELECT '2024-06-01T10:00:00.5Z'::timestamptz AS t`
            )
          )
          expect(rows[0]!.t.toISOString()).toBe("2024-06-01T10:00:00.500Z")
        }))

      it.effect("a text of several statements answers one row array per statement", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const result = yield* sql.unsafe("SELECT 1 AS a; SELECT 2 AS b")
          expect(result).toEqual([[{ a: 1 }], [{ b: 2 }]])
        }))

      it.effect("values mode answers arrays", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const result = yield* sql`SELECT 1::int4 AS a, 'x' AS b`.values
          expect(result).toEqual([[1, "x"]])
        }))
    })
  })
}
