/**
 * An empty schema of its own on the PostgreSQL of `DATABASE_URL`, reached two
 * ways: through a private PgBouncer in transaction mode (`pooledUrl`, what an
 * operator behind a pooler sets as DATABASE_URL), and directly (`directUrl`,
 * what DATABASE_SESSION_URL names for whatever needs a session). The schema
 * is left unmigrated: the first server through the pooler migrates it.
 *
 * Through the pooler, the schema is a PgBouncer database entry whose server
 * connections set `search_path` when they open (a session SET would not stick
 * across transactions, and PgBouncer refuses libpq's `options`). The test's
 * own SqlClient reads the schema directly.
 *
 * PostgreSQL only: the layer dies without DATABASE_URL.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, TestDatabase } from "@crm-relay/store"
import { PgBouncer } from "@crm-relay/testing"
import { Config, Context, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"

export class PooledDatabase extends Context.Tag("test/PooledDatabase")<PooledDatabase, {
  /** The schema's URL through PgBouncer (transaction mode). */
  readonly pooledUrl: string
  /** The schema's URL on PostgreSQL itself (search_path in libpq `options`). */
  readonly directUrl: string
  readonly schema: string
  readonly bouncer: PgBouncer.PgBouncer
}>() {}

export const layer = Layer.unwrapScoped(
  Effect.gen(function*() {
    const base = yield* Config.redacted("DATABASE_URL")
    const parsed = new URL(Redacted.value(base))
    const schema = `test_${randomBytes(8).toString("hex")}`
    const admin = Context.get(yield* Layer.build(Database.layerPostgres({ url: base, poolSize: 1 })), SqlClient.SqlClient)
    yield* Effect.acquireRelease(
      admin`CREATE SCHEMA ${admin(schema)}`,
      () => admin`DROP SCHEMA IF EXISTS ${admin(schema)} CASCADE`.pipe(Effect.ignore)
    )
    const entry = `relay_${schema}`
    const bouncer = yield* PgBouncer.start({
      host: parsed.hostname,
      port: Number(parsed.port || "5432"),
      user: decodeURIComponent(parsed.username || "postgres"),
      databases: { [entry]: { dbname: decodeURIComponent(parsed.pathname.slice(1)), searchPath: schema } }
    })
    const directUrl = TestDatabase.withSearchPath(base, schema)
    return Layer.merge(
      Layer.succeed(PooledDatabase, { pooledUrl: bouncer.url(entry), directUrl: Redacted.value(directUrl), schema, bouncer }),
      Database.layerPostgres({ url: directUrl, poolSize: 2 })
    )
  }).pipe(Effect.orDie)
).pipe(Layer.orDie)
