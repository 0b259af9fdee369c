import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, PgliteClient, TestDatabase } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Scope, TestClock } from "effect"
import { Readiness } from "../src/http/Readiness.js"
import * as MasterKey from "../src/config/MasterKey.js"
import * as Server from "../src/http/Server.js"
import * as TcpProxy from "./support/TcpProxy.js"
import { accountWithKey, bearer, jsonWith, layerServer, replica, request, start } from "./support/TestServer.js"

const DatabaseWithServices = Server.servicesWith(MasterKey.processLocal).pipe(Layer.provideMerge(TestDatabase.layer))

/** A second server over the same database. */
const secondInstance = replica(layerServer())

describe("several instances, roles and failures", () => {
  it.layer(DatabaseWithServices)((it) => {
    it.scoped("Limits: two server instances sharing one database share one limit (60 per key per minute across replicas)", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2031-06-01T08:00:00Z"))
        const a = yield* start(layerServer())
        const b = yield* start(yield* secondInstance)
        const { key } = yield* accountWithKey()
        const get = (base: string) => Effect.map(request("GET", `${base}/perform-list`, { headers: bearer(key) }), (r) => r.status)
        const statuses = yield* Effect.all(
          Array.from({ length: 60 }, (_, i) => get(i % 2 === 0 ? a.public : b.public)),
          { concurrency: 10 }
        )
        expect(statuses.every((s) => s === 200)).toBe(true)
        expect(yield* get(b.public)).toBe(429)
        expect(yield* get(a.public)).toBe(429)
      }))

    it.scoped("Subscription lifecycle across replicas: a subscription created on one instance is removed on another", () =>
      Effect.gen(function*() {
        const a = yield* start(layerServer())
        const b = yield* start(yield* secondInstance)
        const { key } = yield* accountWithKey()
        const created = yield* request("POST", `${a.public}/subscribe`, { headers: jsonWith(key), body: JSON.stringify({ targetUrl: "https://r" }) })
        const id = (created.json as { id: string }).id
        expect((yield* request("DELETE", `${b.public}/subscribe/${id}`, { headers: bearer(key) })).status).toBe(204)
        expect((yield* request("DELETE", `${a.public}/subscribe/${id}`, { headers: bearer(key) })).status).toBe(404)
      }))

    it.scoped("ROLE=worker serves no public Event API but keeps the internal API; ROLE=api serves both", () =>
      Effect.gen(function*() {
        const worker = yield* Layer.build(Layer.fresh(layerServer({ role: "worker" })))
        const listening = Context.get(worker, Server.Listening)
        expect(Option.isNone(listening.publicApi)).toBe(true)
        expect((yield* request("GET", `${listening.internalApi.url}/healthz`)).json).toEqual({ status: "ok" })
        const api = yield* start(layerServer({ role: "api" }))
        const { key } = yield* accountWithKey()
        expect((yield* request("GET", `${api.public}/perform-list`, { headers: bearer(key) })).status).toBe(200)
      }))
  })
})

describe("database unreachable", () => {
  it.scoped("Errors 502: when the database cannot be reached the API answers 502 with the Error object; /readyz says 503", () =>
    Effect.gen(function*() {
      const db = yield* Layer.build(Layer.fresh(TestDatabase.layer))
      const kind = Context.get(db, TestDatabase.TestDatabase)
      // On PostgreSQL the server reaches the database through a proxy the test can cut.
      const proxied = kind.kind === "postgres"
        ? yield* Effect.gen(function*() {
          const url = new URL(Redacted.value(Option.getOrThrow(kind.url)))
          const proxy = yield* TcpProxy.make({ host: url.hostname, port: Number(url.port || "5432") })
          url.hostname = "127.0.0.1"
          url.port = String(proxy.port)
          const database = yield* Layer.build(Layer.fresh(Database.layerPostgres({ url: Redacted.make(url.toString()), poolSize: 2 })))
          return { database, cut: proxy.cut }
        })
        : { database: db, cut: Effect.promise(() => Context.get(db, PgliteClient.PgliteClient).pglite.close()) }
      const services = yield* Layer.build(Layer.fresh(Server.servicesWith(MasterKey.processLocal))).pipe(Effect.provide(proxied.database))
      const context = Context.merge(proxied.database, services)
      const server = yield* start(layerServer()).pipe(Effect.provide(context))
      const { key } = yield* accountWithKey().pipe(Effect.provide(context))
      expect((yield* request("GET", `${server.public}/perform-list`, { headers: bearer(key) })).status).toBe(200)

      yield* proxied.cut
      const unavailable = { error: "The service could not reach its database; retry later." }
      const read = yield* request("GET", `${server.public}/perform-list`, { headers: bearer(key) })
      expect([read.status, read.json]).toEqual([502, unavailable])
      const write = yield* request("POST", `${server.public}/subscribe`, { headers: jsonWith(key), body: JSON.stringify({ targetUrl: "https://r" }) })
      expect([write.status, write.json]).toEqual([502, unavailable])
      const ready = yield* request("GET", `${server.admin}/readyz`)
      expect([ready.status, ready.json]).toEqual([503, { error: "The database does not answer." }])
      expect((yield* request("GET", `${server.admin}/healthz`)).status).toBe(200)
    }))
})

layer(DatabaseWithServices, { excludeTestServices: true })("clean shutdown", (it) => {
  it.effect("stopping the server lets an in-flight request finish before the stop completes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const db = yield* TestDatabase.TestDatabase
      const { key } = yield* accountWithKey()
      const scope = yield* Scope.make()
      const built = yield* Layer.build(Layer.fresh(layerServer())).pipe(Scope.extend(scope))
      const server = { public: Option.getOrThrow(Context.get(built, Server.Listening).publicApi).url }
      const readiness = Context.get(built, Readiness)
      expect(yield* readiness.phase).toBe("serving")

      // Hold the database so the request stays in flight: PGlite's one session, or a table lock on PostgreSQL.
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hold = db.kind === "pglite"
        ? sql.withTransaction(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)))
        : sql.withTransaction(
          Effect.gen(function*() {
            yield* sql`LOCK TABLE rate_limits IN ACCESS EXCLUSIVE MODE`
            yield* Deferred.succeed(holding, undefined)
            yield* Deferred.await(release)
          })
        )
      const holder = yield* Effect.fork(hold)
      yield* Deferred.await(holding)

      const inFlight = yield* Effect.fork(request("GET", `${server.public}/perform-list`, { headers: bearer(key) }))
      if (db.kind === "postgres") {
        // In flight: it waits for the lock.
        yield* Eventually.eventually(Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'rate_limits'::regclass AND NOT granted`,
          (rows) => rows[0]!.n > 0
        ))
      } else {
        // PGlite's one session is held, so the request cannot be seen waiting: give it time to arrive.
        yield* Effect.sleep("300 millis")
      }
      const stopping = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("300 millis")
      // The stop waits for the request; meanwhile /readyz says the server is stopping, so no new work is sent to it.
      expect(stopping.unsafePoll()).toBeNull()
      expect(inFlight.unsafePoll()).toBeNull()
      expect(yield* readiness.phase).toBe("stopping")

      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      expect((yield* Fiber.join(inFlight)).status).toBe(200)
      yield* Fiber.join(stopping)
      // Stopped: nothing listens any more.
      const after = yield* Effect.promise(() => fetch(`${server.public}/perform-list`).then(() => "answered", () => "refused"))
      expect(after).toBe("refused")
    }))
})
