/**
 * The PostgreSQL client across failovers and poolers (issue 41), on real
 * servers: the PostgreSQL of DATABASE_URL, a throwaway primary with a
 * streaming standby of it, a TCP switch standing for a DNS name or a plain
 * balancer, and a private PgBouncer in transaction mode. PostgreSQL only
 * (vitest.config.ts runs it when DATABASE_URL is set).
 */
import { describe, expect, it } from "@effect/vitest"
import { Eventually, PgBouncer, PostgresStandby, TcpSwitch } from "@crm-relay/testing"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, Fiber, Option, Redacted, Stream } from "effect"
import * as Net from "node:net"
import { randomBytes } from "node:crypto"
import * as Pg from "pg"
import * as Database from "../src/Database.js"
import * as PostgresClient from "../src/PostgresClient.js"

const base = process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"

const client = (url: string, options: { poolSize?: number; sessionUrl?: string; applicationName?: string } = {}) =>
  PostgresClient.make({
    url: Redacted.make(url),
    poolSize: options.poolSize ?? 2,
    sessionUrl: Option.map(Option.fromNullable(options.sessionUrl), Redacted.make),
    applicationName: options.applicationName
  }).pipe(Effect.provide(Reactivity.layer))

/** One statement on a connection of its own, outside the client under test. */
const admin = (url: string, text: string) =>
  Effect.promise(async () => {
    const c = new Pg.Client({ connectionString: url })
    await c.connect()
    try {
      return (await c.query(text)).rows
    } finally {
      await c.end()
    }
  })

const uniqueName = () => `crm-relay-test-${randomBytes(6).toString("hex")}`

/** `/readyz`'s question to the database through `sql`: the reason it cannot take writes, if any. */
const readOnlyReason = (sql: SqlClient.SqlClient) =>
  Database.ping().pipe(
    Effect.provideService(SqlClient.SqlClient, sql),
    Effect.provideService(Database.DatabaseInfo, { kind: "postgres", location: "test" })
  )

/** Takes what `stream` emits into an array, in the background, for the scope. */
const collect = (stream: Stream.Stream<string, SqlError>) =>
  Effect.gen(function*() {
    const seen: Array<string> = []
    yield* Stream.runForEach(stream, (payload) => Effect.sync(() => seen.push(payload))).pipe(Effect.forkScoped)
    return seen
  })

describe("PostgresClient", () => {
  it.live("issue 41: \"A connection that answers a write with 25006 read_only_sql_transaction ... is dropped and the work retried as transient\": the next statement runs on a new connection and writes", () =>
    Effect.gen(function*() {
      const { client: sql } = yield* client(base, { poolSize: 1 })
      const schema = `x_${randomBytes(6).toString("hex")}`
      yield* Effect.addFinalizer(() => admin(base, `DROP SCHEMA IF EXISTS ${schema}`).pipe(Effect.ignore))
      const [before] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
      expect(yield* readOnlyReason(sql)).toEqual(Option.none())
      // The pool's only connection turns read-only under it, as one still reaching a demoted primary does.
      yield* sql`SET default_transaction_read_only = on`
      // "/readyz tells the truth throughout": a server that takes no write is not ready (`SELECT 1` would say it is).
      expect(yield* readOnlyReason(sql)).toEqual(Option.some(Database.READ_ONLY_STANDBY))
      const refused = yield* Effect.either(sql`CREATE SCHEMA ${sql(schema)}`)
      expect(Either.isLeft(refused)).toBe(true)
      const error = Either.getLeft(refused).pipe(Option.getOrThrow)
      expect((error.cause as { code?: string }).code).toBe("25006")
      expect(PostgresClient.isTransient(error)).toBe(true)
      // The message a 502's log line carries says why, so a failover reads in the logs as what it is.
      expect(error.message).toMatch(/read-only standby.*\(SQLSTATE 25006: cannot execute CREATE SCHEMA in a read-only transaction\)$/)
      const [after] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
      expect(after!.pid).not.toBe(before!.pid)
      yield* sql`CREATE SCHEMA ${sql(schema)}`
    }).pipe(Effect.scoped))

  it.live("a connection shut down under a statement (57P01) is dropped and its error is transient, in a transaction too (a failed ROLLBACK on the dead connection would make it a defect)", () =>
    Effect.gen(function*() {
      const name = uniqueName()
      const { client: sql } = yield* client(base, { poolSize: 2, applicationName: name })
      const terminateSleeper = (seconds: number) => Eventually.eventually(
        admin(base, `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
          WHERE application_name = '${name}' AND query LIKE 'SELECT pg_sleep(${seconds})%' AND state = 'active'`).pipe(
          Effect.map((rows) => rows.length > 0)
        )
      )
      const alone = yield* Effect.fork(Effect.either(sql`SELECT pg_sleep(30)`))
      yield* terminateSleeper(30)
      const lost = yield* Fiber.join(alone)
      expect(Either.isLeft(lost) && PostgresClient.isTransient(lost.left)).toBe(true)
      const inTransaction = yield* Effect.fork(Effect.either(sql.withTransaction(sql`SELECT pg_sleep(31)`)))
      yield* terminateSleeper(31)
      const lostInTransaction = yield* Fiber.join(inTransaction)
      expect(Either.isLeft(lostInTransaction) && PostgresClient.isTransient(lostInTransaction.left)).toBe(true)
      // No dead connection went back to the pool: the next statements answer.
      for (let i = 0; i < 4; i++) expect(yield* sql<{ one: number }>`SELECT 1 AS one`).toEqual([{ one: 1 }])
    }).pipe(Effect.scoped))

  it.live("issue 41: a DATABASE_URL in libpq's multi-host form is refused at start, pointing to HAProxy or the provider's single endpoint; the first host is never used", () =>
    Effect.gen(function*() {
      let connections = 0
      const first = Net.createServer((socket) => {
        connections++
        socket.destroy()
      })
      const port = yield* Effect.async<number>((resume) => {
        first.listen(0, "127.0.0.1", () => resume(Effect.succeed((first.address() as Net.AddressInfo).port)))
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => first.close()))
      for (const url of [`postgres://postgres@127.0.0.1:${port},127.0.0.1:5432/test`, `postgres:///test?host=127.0.0.1,localhost&port=${port}`]) {
        const refused = yield* Effect.flip(client(url))
        expect(refused._tag).toBe("DatabaseRefused")
        expect(refused.message).toMatch(/DATABASE_URL names several hosts .* HAProxy .* single endpoint\.$/)
      }
      expect(connections).toBe(0)
    }).pipe(Effect.scoped))

  describe("with a primary and a streaming standby of it", () => {
    it.live("issue 41: \"a DATABASE_URL that reaches a standby: the sentence says it is read-only\"; a new connection that lands on a standby is closed and fails as transient; LISTEN is not kept on a standby and comes back with MISSED on the primary", () =>
      Effect.gen(function*() {
        const pair = yield* PostgresStandby.start()
        expect(yield* admin(pair.standby.url(), "SELECT pg_is_in_recovery() AS r")).toEqual([{ r: true }])

        // Refused at start, with the sentence.
        const refused = yield* Effect.flip(client(pair.standby.url()))
        expect(refused._tag).toBe("DatabaseRefused")
        expect(refused.message).toMatch(/^DATABASE_URL reaches a read-only server \(a standby.*point it at the primary/)

        // Behind a switch (a DNS name, a plain balancer) that moves to the standby.
        const name = uniqueName()
        const front = yield* TcpSwitch.start(pair.primary.port)
        const { client: sql, listen } = yield* client(`postgres://postgres@127.0.0.1:${front.port}/postgres`, {
          poolSize: 3,
          applicationName: name
        })
        const heard = yield* collect(yield* listen.subscribe("wake"))
        yield* sql`SELECT pg_notify('wake', 'before')`
        yield* Eventually.eventually(Effect.sync(() => heard.includes("before")))

        expect(yield* readOnlyReason(sql)).toEqual(Option.none())
        front.switchTo(pair.standby.port)
        yield* front.cutAll
        for (let i = 0; i < 3; i++) {
          const failed = yield* Effect.flip(sql<{ r: boolean }>`SELECT pg_is_in_recovery() AS r`)
          expect(PostgresClient.isTransient(failed)).toBe(true)
          expect(failed.message).toMatch(/read-only standby/)
        }
        // "/readyz tells the truth throughout": on the standby it says why it is not ready, not that the database is gone.
        expect(yield* readOnlyReason(sql)).toEqual(Option.some(Database.READ_ONLY_STANDBY))
        // The pool holds none of them: the standby has no connection of this client left open.
        yield* Eventually.eventually(
          admin(pair.standby.url(), `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = '${name}'`).pipe(
            Effect.map((rows) => rows[0].n === 0)
          )
        )
        const missedBefore = heard.filter((p) => p === PostgresClient.MISSED).length
        expect(missedBefore).toBe(0)

        front.switchTo(pair.primary.port)
        // LISTEN comes back on the primary and says a notification may have been missed.
        yield* Eventually.eventually(Effect.sync(() => heard.includes(PostgresClient.MISSED)))
        expect(yield* sql<{ r: boolean }>`SELECT pg_is_in_recovery() AS r`).toEqual([{ r: false }])
        yield* sql`SELECT pg_notify('wake', 'after')`
        yield* Eventually.eventually(Effect.sync(() => heard.includes("after")))
      }).pipe(Effect.scoped), { timeout: 600_000 })
  })

  it.live("issue 41: \"LISTEN is re-established\": after its connection is terminated, subscribers hear MISSED, then what is sent next", () =>
    Effect.gen(function*() {
      const name = uniqueName()
      const { client: sql, listen } = yield* client(base, { applicationName: name })
      const channel = uniqueName()
      const heard = yield* collect(yield* listen.subscribe(channel))
      for (let round = 0; round < 2; round++) {
        const missed = heard.filter((p) => p === PostgresClient.MISSED).length
        yield* admin(base, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${name}' AND query LIKE 'LISTEN%'`)
        yield* Eventually.eventually(Effect.sync(() => heard.filter((p) => p === PostgresClient.MISSED).length > missed))
        yield* sql`SELECT pg_notify(${channel}, ${`after-${round}`})`
        yield* Eventually.eventually(Effect.sync(() => heard.includes(`after-${round}`)))
      }
    }).pipe(Effect.scoped))

  it.live("issue 41: through PgBouncer in transaction mode without a session URL, the pooler is detected and listeners are woken by polling; with DATABASE_SESSION_URL they LISTEN", () =>
    Effect.gen(function*() {
      const bouncer = yield* PgBouncer.start()
      const through = bouncer.url("test")
      const direct = yield* client(base)
      expect(yield* direct.listen.mode).toBe("listen")

      const pooled = yield* client(through, { poolSize: 4 })
      expect(yield* pooled.listen.mode).toBe("poll")
      const heard = yield* collect(yield* pooled.listen.subscribe(uniqueName()))
      const schema = `x_${randomBytes(6).toString("hex")}`
      yield* Effect.addFinalizer(() => admin(base, `DROP SCHEMA IF EXISTS ${schema}`).pipe(Effect.ignore))
      // A write (any: here a schema) wakes the listeners within the poll.
      yield* pooled.client`CREATE SCHEMA ${pooled.client(schema)}`
      yield* Eventually.eventually(Effect.sync(() => heard.includes(PostgresClient.MISSED)))
      expect(PostgresClient.pollingSentence()).toBe(
        "DATABASE_URL goes through a transaction pooler (PgBouncer?), where LISTEN cannot work: workers poll every 100 ms instead; " +
          "set DATABASE_SESSION_URL to a direct connection to the primary for wake-ups in milliseconds."
      )

      const withSession = yield* client(through, { sessionUrl: base })
      expect(yield* withSession.listen.mode).toBe("listen")
      const channel = uniqueName()
      const payloads = yield* withSession.listen.subscribe(channel)
      yield* withSession.client`SELECT pg_notify(${channel}, 'through-the-pooler')`
      const first = yield* Stream.runHead(payloads).pipe(Effect.timeout(Eventually.HANG_BOUND))
      expect(first).toEqual(Option.some("through-the-pooler"))
    }).pipe(Effect.scoped))
})

