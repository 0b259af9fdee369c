/**
 * The PostgreSQL database of a benchmark run: a fresh schema of
 * DATABASE_URL, dropped when the run's scope ends.
 */
import { TestDatabase } from "@crm-relay/store"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, type Redacted } from "effect"
import { randomBytes } from "node:crypto"

/** A fresh schema of `base` for the scope: its name, its URL (search_path set) and the server's version. */
export const freshSchema = (base: Redacted.Redacted) =>
  Effect.gen(function*() {
    const admin = yield* PgClient.make({ url: base, maxConnections: 1 })
    const schema = `bench_${randomBytes(6).toString("hex")}`
    yield* Effect.acquireRelease(
      admin`CREATE SCHEMA ${admin(schema)}`,
      () => admin`DROP SCHEMA IF EXISTS ${admin(schema)} CASCADE`.pipe(Effect.ignore)
    )
    const [version] = yield* admin<{ server_version: string }>`SHOW server_version`
    return { schema, url: TestDatabase.withSearchPath(base, schema), version: version?.server_version ?? "?" }
  })
