/**
 * WAL per outcome: what PostgreSQL writes to its log for one accepted call outcome with one lead
 * subscription, from acceptance to the delivery stored as delivered (intake, fan-out, claim, the
 * delivery's result and attempt row), through a real `crm-relay serve` on PostgreSQL (DATABASE_URL).
 *
 *   npm run bench:outcome-wal -- [--outcomes 200] [--subscriptions 1] [--rounds 3] [--baseline path/to/other/crm-relay.js] [--detail]
 *
 * Two figures per round, both from PostgreSQL itself: the difference of `pg_current_wal_insert_lsn()`
 * over the run (the whole cluster's WAL, so other databases' work shows up in it), and the WAL records
 * (pg_walinspect, which the run creates in its database if it can) that touch the run's own schema,
 * with the commit records of their transactions: this server's work alone. With `--baseline`, the
 * other build runs in alternating rounds on a schema of its own, and both are printed.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Console, Duration, Effect, Option, Redacted } from "effect"
import * as Argv from "../support/Argv.js"
import { freshSchema } from "../support/BenchDatabase.js"
import { jsonClient } from "../support/Http.js"
import { liveAccount, prepare, subscribeLeads } from "../support/LoopbackRun.js"
import { leadOutcome, startReceiver } from "../support/Receiver.js"
import { runMain } from "../support/runMain.js"
import { serve } from "../support/ServerProcess.js"

const outcomes = Argv.integer("outcomes", 200)
/** Lead subscriptions of the account (each outcome becomes this many deliveries). */
const subscriptions = Argv.integer("subscriptions", 1)
const rounds = Argv.integer("rounds", 3)
const baseline = Argv.text("baseline")
/** Also print where the product's WAL went (record kind and relation), per outcome, in the last round. */
const detail = Argv.flag("detail")
const ADMIN_TOKEN = "bench-admin-token-outcome-wal-000000"
const MASTER_KEY = Buffer.alloc(32, 7).toString("base64")

const main = Effect.gen(function*() {
  const run = yield* prepare("outcome-wal")
  // The database without the run schema's search_path: a baseline gets a schema of its own.
  const plain = new URL(Redacted.value(run.database.url))
  plain.searchParams.delete("options")
  const base = Redacted.make(plain.toString())
  const admin = yield* PgClient.make({ url: base, maxConnections: 1 })
  const inspect = yield* admin`CREATE EXTENSION IF NOT EXISTS pg_walinspect WITH SCHEMA public`.pipe(Effect.as(true), Effect.orElseSucceed(() => false))
  const call = yield* jsonClient(8)
  const receiver = yield* startReceiver(run.tls)

  // One build on a fresh schema: the server, an account with one lead subscription, warmed up.
  const setUp = (name: string, bin: string | undefined) =>
    Effect.gen(function*() {
      const db = name === "product" ? run.database : yield* freshSchema(base)
      const schema = new URL(Redacted.value(db.url)).searchParams.get("options")!.replace(/^.*search_path=/, "")
      const server = yield* serve({
        databaseUrl: db.url,
        pool: 10,
        adminToken: ADMIN_TOKEN,
        masterKey: MASTER_KEY,
        cpuProfileDir: undefined,
        stdout: "ignore",
        logLevel: "Warning",
        env: run.serverEnv,
        stopWithin: "20 seconds",
        bin
      })
      const account = yield* liveAccount(call, server, ADMIN_TOKEN, `WAL ${name}`)
      for (let i = 0; i < subscriptions; i++) yield* subscribeLeads(call, server, account.key, receiver.url)
      return { name, server, account, schema }
    })

  const builds = [yield* setUp("product", undefined)]
  if (baseline !== undefined) builds.push(yield* setUp("baseline", baseline))

  // Work left: pending deliveries, and (where the build has them) events not yet finished.
  const settled = (schema: string) =>
    Effect.gen(function*() {
      const [events] = yield* admin<{ found: boolean }>`SELECT to_regclass(${`${schema}.events`}) IS NOT NULL AS found`
      const [left] = events!.found
        ? yield* admin<{ n: number }>`SELECT ((SELECT count(*) FROM ${admin(schema)}.deliveries WHERE status = 'pending')
            + (SELECT count(*) FROM ${admin(schema)}.events WHERE status = 'pending'))::int AS n`
        : yield* admin<{ n: number }>`SELECT count(*)::int AS n FROM ${admin(schema)}.deliveries WHERE status = 'pending'`
      return left!.n
    })
  const lsn = admin<{ lsn: string }>`SELECT pg_current_wal_flush_lsn()::text AS lsn`.pipe(Effect.map((r) => r[0]!.lsn))

  // Sends `n` outcomes one after the other and waits until every delivery is stored as delivered.
  const send = (build: (typeof builds)[number], n: number) =>
    Effect.gen(function*() {
      const before = receiver.arrivals.total
      for (let i = 0; i < n; i++) {
        yield* call("POST", `${build.server.adminUrl}/v1/calls/wal-${build.name}-${crypto.randomUUID()}/outcome`, ADMIN_TOKEN,
          leadOutcome(build.account.id))
      }
      while (receiver.arrivals.total < before + n * subscriptions) yield* Effect.sleep(Duration.millis(20))
      while ((yield* settled(build.schema)) > 0) yield* Effect.sleep(Duration.millis(20))
    })

  const ownWal = (schema: string, from: string, to: string) =>
    admin<{ bytes: string; records: string }>`
      WITH rels AS (
        SELECT pg_relation_filenode(c.oid)::text AS node FROM pg_class AS c
        WHERE c.relnamespace = ${schema}::regnamespace AND pg_relation_filenode(c.oid) IS NOT NULL
      ), recs AS (
        SELECT * FROM public.pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn)
      ), mine AS (
        SELECT r.* FROM recs AS r WHERE EXISTS (
          SELECT 1 FROM rels WHERE r.block_ref ~ ('rel [0-9]+/[0-9]+/' || rels.node || '( |,|$)'))
      )
      SELECT (SELECT COALESCE(sum(record_length), 0) FROM mine)
        + (SELECT COALESCE(sum(r.record_length), 0) FROM recs AS r
           WHERE r.resource_manager = 'Transaction' AND r.xid IN (SELECT xid FROM mine WHERE xid <> 0)) AS bytes,
        (SELECT count(*) FROM mine) AS records`

  // Where the WAL went: bytes per outcome by record kind and relation (the first block's), largest first.
  const breakdown = (schema: string, from: string, to: string) =>
    admin<{ kind: string; rel: string | null; bytes: string; fpi: string; records: string }>`
      WITH rels AS (
        SELECT pg_relation_filenode(c.oid)::text AS node, c.relname FROM pg_class AS c
        WHERE c.relnamespace = ${schema}::regnamespace AND pg_relation_filenode(c.oid) IS NOT NULL
      ), recs AS (
        SELECT r.*, substring(r.block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)') AS node
        FROM public.pg_get_wal_records_info(${from}::pg_lsn, ${to}::pg_lsn) AS r
      ), mine AS (
        SELECT recs.*, rels.relname FROM recs JOIN rels ON rels.node = recs.node
      ), commits AS (
        SELECT r.*, NULL::name AS relname FROM recs AS r
        WHERE r.resource_manager = 'Transaction' AND r.xid IN (SELECT xid FROM mine WHERE xid <> 0)
      )
      SELECT resource_manager || '/' || record_type AS kind, relname AS rel, sum(record_length)::text AS bytes,
        sum(fpi_length)::text AS fpi, count(*)::text AS records
      FROM (SELECT resource_manager, record_type, record_length, fpi_length, relname FROM mine
        UNION ALL SELECT resource_manager, record_type, record_length, fpi_length, relname FROM commits) AS all_records
      GROUP BY 1, 2 ORDER BY sum(record_length) DESC`

  for (const build of builds) yield* send(build, 20)
  yield* Console.log(`outcome-wal: ${outcomes} outcomes a round, ${rounds} rounds, ${subscriptions} lead subscription(s), PostgreSQL ${run.database.version}`)
  const results = new Map<string, Array<{ cluster: number; own: number }>>()
  for (let round = 0; round < rounds; round++) {
    for (const build of builds) {
      const from = yield* lsn
      yield* send(build, outcomes)
      const to = yield* lsn
      const [diff] = yield* admin<{ bytes: string }>`SELECT (${to}::pg_lsn - ${from}::pg_lsn)::text AS bytes`
      const own = inspect ? Number((yield* ownWal(build.schema, from, to))[0]!.bytes) : Number.NaN
      const figures = { cluster: Number(diff!.bytes) / outcomes, own: own / outcomes }
      results.set(build.name, [...(results.get(build.name) ?? []), figures])
      yield* Console.log(`round ${round + 1} ${build.name.padEnd(8)} WAL per outcome: ${figures.own.toFixed(0)} B own schema, ${figures.cluster.toFixed(0)} B cluster`)
      if (detail && inspect && round === rounds - 1) {
        for (const row of yield* breakdown(build.schema, from, to)) {
          yield* Console.log(`  ${(Number(row.bytes) / outcomes).toFixed(0).padStart(6)} B  (fpi ${(Number(row.fpi) / outcomes).toFixed(0)} B, ${(Number(row.records) / outcomes).toFixed(2)} records)  ${row.kind}  ${row.rel ?? ""}`)
        }
      }
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  for (const [name, figures] of results) {
    yield* Console.log(`${name.padEnd(8)} median WAL per outcome: ${median(figures.map((f) => f.own)).toFixed(0)} B own schema (${(median(figures.map((f) => f.own)) / 1024).toFixed(2)} KiB), ${median(figures.map((f) => f.cluster)).toFixed(0)} B cluster`)
  }
  const product = results.get("product")
  const other = results.get("baseline")
  if (product !== undefined && other !== undefined) {
    yield* Console.log(`ratio product/baseline (own schema): ${(median(product.map((f) => f.own)) / median(other.map((f) => f.own))).toFixed(2)}`)
  }
  yield* Option.match(Option.some(inspect), { onNone: () => Effect.void, onSome: (ok) => ok ? Effect.void : Console.log("pg_walinspect unavailable: only the cluster figure is measured") })
})

runMain(main.pipe(Effect.tapErrorCause((cause) => Console.error(String((Cause.squash(cause) as { cause?: unknown }).cause ?? "")))))
