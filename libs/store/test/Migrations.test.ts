import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import * as Database from "../src/Database.js"
import * as Migration from "../src/Migration.js"
import * as Migrations from "../src/Migrations.js"
import { migrations } from "../src/migrations/index.js"
import * as TestDatabase from "../src/TestDatabase.js"

const tables = ["accounts", "integration_keys", "subscriptions", "rate_limits", "deliveries"]
const all = Migrations.list()

layer(TestDatabase.layer, { excludeTestServices: true })("Migrations", (it) => {
  it.effect("the Event API tables exist and a second run applies nothing (forward-only, idempotent)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ table_name: string }>`
        SELECT table_name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_name IN ${sql.in(tables)}`
      expect(rows.map((r) => r.table_name).sort()).toEqual([...tables].sort())
      expect(yield* Migrations.run()).toEqual([])
      const applied = yield* sql<{ id: number; name: string }>`SELECT id, name FROM ${sql(Migrations.TABLE)} ORDER BY id`
      expect(applied).toEqual(all.map(([id, name]) => ({ id, name })))
    }))

  it.effect("every lookup path has an index, and deliveries carry none that only retention or the wake-time would read (#35 leaner writes)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ indexname: string }>`
        SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()`
      const names = rows.map((r) => r.indexname)
      expect(names).toEqual(expect.arrayContaining([
        "integration_keys_secret_hash_key",
        "integration_keys_account_id_idx",
        "subscriptions_active_idx",
        "rate_limits_pkey",
        "deliveries_account_latest_idx",
        "deliveries_fair_due_idx"
      ]))
      // Each entry is WAL per delivery (migration 0023): retention walks deliveries_account_latest_idx,
      // the wake-time of a fair table its fair index.
      expect(names).not.toContain("deliveries_finished_idx")
      expect(names).not.toContain("deliveries_due_idx")
    }))

  it.effect("concurrent runs apply a new migration exactly once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const record = {
        ...migrations,
        "0101_concurrent_probe": Migration.make([`CREATE TABLE concurrent_probe (id int)`])
      }
      const runs = yield* Effect.all(Array.from({ length: 4 }, () => Migrations.run(record)), {
        concurrency: "unbounded"
      })
      expect(runs.flat()).toEqual([[101, "concurrent_probe"]])
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM concurrent_probe`
      expect(row!.n).toBe(0)
    }))

  it.effect("each migration is its own transaction: a failing one is rolled back, earlier ones stay", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const record = {
        ...migrations,
        "0201_good": Migration.make([`CREATE TABLE good_probe (id int)`]),
        "0202_bad": Migration.make([`CREATE TABLE half_probe (id int)`, `SELECT no_such_column FROM good_probe`])
      }
      const error = yield* Migrations.run(record).pipe(Effect.flip)
      expect(error._tag).toBe("MigrationError")
      expect(error.message).toContain("Migration 202_bad failed")
      expect(error.message).toContain("no_such_column")
      const recorded = yield* sql<{ id: number }>`SELECT id FROM ${sql(Migrations.TABLE)} WHERE id >= 201`
      expect(recorded).toEqual([{ id: 201 }])
      const [half] = yield* sql<{ t: string | null }>`SELECT to_regclass('half_probe')::text AS t`
      expect(half!.t).toBeNull()
    }))

  it.effect("a recorded migration whose name changed is refused (bad state)", () =>
    Effect.gen(function*() {
      const error = yield* Migrations.run({ "0001_renamed": Migration.make([]) }).pipe(Effect.flip)
      expect(error).toMatchObject({ _tag: "MigrationError", reason: "bad-state" })
    }))

  it.effect("on PostgreSQL, a start on an up-to-date database reads what is applied and takes no lock (a replica holding it does not delay it)", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase.TestDatabase
      if (db.kind !== "postgres") return
      const sql = yield* SqlClient.SqlClient
      const held = yield* Deferred.make<void>()
      const done = yield* Deferred.make<void>()
      // Another replica, in the middle of its run: it holds the migration lock until this test is done.
      const other = yield* sql.withTransaction(
        sql`SELECT pg_advisory_xact_lock(hashtext(current_schema() || ${`.${Migrations.TABLE}`}))`.pipe(
          Effect.zipRight(Deferred.succeed(held, undefined)),
          Effect.zipRight(Deferred.await(done))
        )
      ).pipe(Effect.fork)
      yield* Deferred.await(held)
      const replica = Migrations.run().pipe(
        Effect.provide(Database.layerPostgres({ url: Option.getOrThrow(db.url), poolSize: 1 }).pipe(Layer.fresh))
      )
      // Disconnected: a run stuck behind the lock cannot be interrupted until the lock is released, below.
      const applied = yield* replica.pipe(
        Effect.disconnect,
        Effect.timeoutFail({ duration: "120 seconds", onTimeout: () => new Error("the run waited for the migration lock") }),
        Effect.ensuring(Deferred.succeed(done, undefined))
      )
      yield* Fiber.join(other)
      expect(applied).toEqual([])
    }))

  it.effect("on PostgreSQL, replicas migrating a fresh schema at once create everything exactly once", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase.TestDatabase
      if (db.kind !== "postgres") return
      const sql = yield* SqlClient.SqlClient
      const schema = `${Option.getOrThrow(db.schema)}_fresh`
      yield* sql`CREATE SCHEMA ${sql(schema)}`
      const url = TestDatabase.withSearchPath(Option.getOrThrow(db.url), schema)
      const replica = Migrations.run().pipe(
        Effect.provide(Database.layerPostgres({ url, poolSize: 2 }).pipe(Layer.fresh))
      )
      const runs = yield* Effect.all([replica, replica, replica, replica], { concurrency: "unbounded" }).pipe(
        Effect.ensuring(sql`DROP SCHEMA ${sql(schema)} CASCADE`.pipe(Effect.ignore))
      )
      // Each migration is its own transaction: replicas may share the work, but together they apply
      // every migration exactly once, and each applies its share in order.
      const applied = runs.flat()
      expect([...applied].sort(([a], [b]) => Number(a) - Number(b))).toEqual(all)
      for (const run of runs) expect(run).toEqual([...run].sort(([a], [b]) => Number(a) - Number(b)))
    }))
})
