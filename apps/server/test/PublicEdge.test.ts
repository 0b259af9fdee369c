/**
 * The public port under cheap attacks, with real sockets on loopback and
 * short configured deadlines: silent and slow connections are closed in
 * time, the connection budget refuses the excess while the internal port
 * keeps answering, and the failed-key limit per client address answers 429
 * without touching the database (trusted proxies only may name the address),
 * holding its answers. The Integrations area's listener, which faces browsers,
 * keeps the same deadlines and a budget of its own.
 */
import { layer } from "@effect/vitest"
import { expect } from "@effect/vitest"
import * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { MinuteWindow, RawHttp } from "@crm-relay/testing"
import { TestDatabase } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, Layer, Option, Schedule } from "effect"
import * as Net from "node:net"
import { defaultEdge } from "../src/http/Server.js"
import type * as PublicEdge from "../src/config/PublicEdge.js"
import * as LogCapture from "./support/LogCapture.js"
import { adminRequest, layerServer, replica, start } from "./support/TestServer.js"

const UNAUTHORIZED = { error: "The integration key is missing, invalid or disabled." }

const edge = (overrides: Partial<PublicEdge.PublicEdge["limits"]> & Partial<Omit<PublicEdge.PublicEdge, "limits">> = {}): PublicEdge.PublicEdge => {
  const { failedKeyHoldMs, failedKeyLimit, portalMaxConnections, trustedProxies, ...limits } = overrides
  return {
    limits: { ...defaultEdge.limits, ...limits },
    failedKeyLimit: failedKeyLimit ?? defaultEdge.failedKeyLimit,
    // Answered at once unless a test is about the hold.
    failedKeyHoldMs: failedKeyHoldMs ?? 0,
    portalMaxConnections: portalMaxConnections ?? defaultEdge.portalMaxConnections,
    trustedProxies: trustedProxies ?? defaultEdge.trustedProxies
  }
}

const portOf = (url: string) => Number(new URL(url).port)

/** What a raw connection saw: the bytes it received and how long until the server closed it (or `bound` passed). */
interface Watched {
  readonly text: string
  readonly closed: boolean
  readonly afterMs: number
}

/**
 * Opens a connection to `port`, writes `parts` (a string each `everyMs`), and
 * waits until the server closes it or `boundMs` passes.
 */
const watch = (port: number, parts: ReadonlyArray<string | Buffer>, everyMs: number, boundMs: number) =>
  Effect.async<Watched>((resume) => {
    const started = performance.now()
    const socket = Net.connect({ port, host: "127.0.0.1" })
    const received: Array<Buffer> = []
    let index = 0
    let writer: NodeJS.Timeout | undefined
    const finish = (closed: boolean) => {
      clearTimeout(bound)
      clearInterval(writer)
      socket.destroy()
      resume(Effect.succeed({ text: Buffer.concat(received).toString("latin1"), closed, afterMs: performance.now() - started }))
    }
    const bound = setTimeout(() => finish(false), boundMs)
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("close", () => finish(true))
    socket.on("error", () => undefined)
    socket.on("connect", () => {
      if (parts.length === 0) return
      socket.write(parts[index++]!)
      writer = setInterval(() => {
        if (index < parts.length && !socket.destroyed) socket.write(parts[index++]!)
      }, everyMs)
    })
  })

/** `count` connections to `port` that send nothing, open for the scope. */
const silentConnections = (port: number, count: number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      Promise.all(Array.from({ length: count }, () =>
        new Promise<Net.Socket>((resolve) => {
          const socket = Net.connect({ port, host: "127.0.0.1" }, () => resolve(socket))
          socket.on("error", () => undefined)
        })))
    ),
    (sockets) => Effect.sync(() => sockets.forEach((s) => s.destroy()))
  )

const bodyOf = (text: string) => JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as unknown

/** The value of the counter `name` (with `labels`) on the internal port's GET /metrics, 0 when absent. */
const counter = (admin: string, name: string, labels = "") =>
  Effect.map(adminRequest(admin, "GET", "/metrics"), (answer) => {
    const line = answer.text.split("\n").find((l) => l.startsWith(`${name}${labels} `))
    return line === undefined ? 0 : Number(line.split(" ").pop())
  })

const newKey = (admin: string) =>
  Effect.gen(function*() {
    const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name: "Edge" })).json as { id: string }
    return ((yield* adminRequest(admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { key: string }).key
  })

const performList = (key: string, extra: ReadonlyArray<readonly [string, string]> = []) =>
  RawHttp.format("GET", "/perform-list", [["Host", "edge.test"], ["Authorization", `Bearer ${key}`], ["Connection", "close"], ...extra])

const send = (port: number, request: Buffer) =>
  Effect.promise(() => RawHttp.exchange(port, request, { expect: 1, timeoutMillis: 30_000 })).pipe(Effect.map((exchange) => exchange.answers[0]!))

const failedKeyRows = (address: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.orDie(sql<{ count: number }>`SELECT count FROM rate_limits WHERE subject = ${`failed-key:${address}`}`)).pipe(
      Effect.map((rows) => rows[0]?.count ?? 0)
    )

layer(TestDatabase.layer, { excludeTestServices: true })("public port timeouts", (it) => {
  it.scoped("a connection that sends no byte is closed once the head deadline passes (PUBLIC_HEAD_TIMEOUT_MS), and counted", () =>
    Effect.gen(function*() {
      const server = yield* start(layerServer({ edge: edge({ headTimeoutMs: 300, requestTimeoutMs: 2_000 }) }))
      const before = yield* counter(server.admin, "crm_relay_public_timeouts_total", "{phase=\"head\"}")
      const seen = yield* watch(portOf(server.public), [], 0, 20_000)
      expect(seen.closed).toBe(true)
      expect(seen.afterMs).toBeGreaterThanOrEqual(250)
      expect(seen.text).toBe("")
      expect(yield* counter(server.admin, "crm_relay_public_timeouts_total", "{phase=\"head\"}")).toBe(before + 1)
    }))

  it.scoped("a head sent a byte at a time (slow headers) is answered 400 with the Error object and closed at the head deadline", () =>
    Effect.gen(function*() {
      const server = yield* start(layerServer({ edge: edge({ headTimeoutMs: 400, requestTimeoutMs: 5_000 }) }))
      const head = "GET /perform-list HTTP/1.1\r\nHost: edge.test\r\nX-Slow: " + "a".repeat(500)
      const seen = yield* watch(portOf(server.public), head.split(""), 20, 20_000)
      expect(seen.closed).toBe(true)
      // Each byte came well within any idle timeout: only the deadline of the whole head closes it.
      expect(seen.afterMs).toBeGreaterThanOrEqual(350)
      expect(seen.afterMs).toBeLessThan(head.length * 20)
      expect(seen.text.startsWith("HTTP/1.1 400 ")).toBe(true)
      expect(bodyOf(seen.text)).toEqual({ error: "The request did not arrive in time." })
    }))

  it.scoped("a body that stops arriving is answered 400 with the Error object and closed at the request deadline (PUBLIC_REQUEST_TIMEOUT_MS)", () =>
    Effect.gen(function*() {
      const server = yield* start(layerServer({ edge: edge({ headTimeoutMs: 300, requestTimeoutMs: 800 }) }))
      const key = yield* newKey(server.admin)
      const before = yield* counter(server.admin, "crm_relay_public_timeouts_total", "{phase=\"request\"}")
      const head = RawHttp.format("POST", "/subscribe", [
        ["Host", "edge.test"],
        ["Authorization", `Bearer ${key}`],
        ["Content-Type", "application/json"],
        ["Content-Length", "200"]
      ])
      const seen = yield* watch(portOf(server.public), [head, "{\"targetUrl\":"], 50, 20_000)
      expect(seen.closed).toBe(true)
      expect(seen.afterMs).toBeGreaterThanOrEqual(700)
      expect(seen.text.startsWith("HTTP/1.1 400 ")).toBe(true)
      expect(bodyOf(seen.text)).toEqual({ error: "The request did not arrive in time." })
      expect(yield* counter(server.admin, "crm_relay_public_timeouts_total", "{phase=\"request\"}")).toBe(before + 1)
      // Nothing was stored from the cut request.
      const list = yield* send(portOf(server.public), performList(key))
      expect(list.status).toBe(200)
    }))

  it.scoped("a keep-alive connection left idle after its answer is closed after PUBLIC_KEEP_ALIVE_TIMEOUT_MS", () =>
    Effect.gen(function*() {
      const server = yield* start(layerServer({ edge: edge({ headTimeoutMs: 5_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 300 }) }))
      const request = RawHttp.format("GET", "/perform-list", [["Host", "edge.test"]])
      const seen = yield* watch(portOf(server.public), [request], 0, 20_000)
      expect(seen.closed).toBe(true)
      expect(seen.text.startsWith("HTTP/1.1 401 ")).toBe(true)
      expect(seen.afterMs).toBeGreaterThanOrEqual(250)
      expect(seen.afterMs).toBeLessThan(4_500)
    }))
})

layer(TestDatabase.layer, { excludeTestServices: true })("public port connection budget", (it) => {
  it.scoped("past PUBLIC_MAX_CONNECTIONS a connection is closed at once and counted; the held ones and the internal port keep working", () =>
    Effect.gen(function*() {
      const server = yield* start(layerServer({ edge: edge({ maxConnections: 3, headTimeoutMs: 20_000, requestTimeoutMs: 30_000 }) }))
      const port = portOf(server.public)
      const before = yield* counter(server.admin, "crm_relay_public_connections_refused_total")
      // Three silent connections hold the budget.
      const held = yield* silentConnections(port, 3)
      // The kernel queues connections in order and Node accepts them in that order: these three are counted first.
      const refused = yield* watch(port, [performList("crk_x")], 0, 20_000)
      expect(refused.closed).toBe(true)
      expect(refused.text).toBe("")
      expect(yield* counter(server.admin, "crm_relay_public_connections_refused_total")).toBe(before + 1)
      // The internal port answers all along.
      expect((yield* adminRequest(server.admin, "GET", "/v1/accounts")).status).toBe(200)
      // A held connection is still served.
      const answer = yield* Effect.async<string>((resume) => {
        const socket = held[0]!
        const chunks: Array<Buffer> = []
        socket.on("data", (chunk) => chunks.push(chunk))
        socket.on("close", () => resume(Effect.succeed(Buffer.concat(chunks).toString("latin1"))))
        socket.write(performList("crk_x"))
      })
      expect(answer.startsWith("HTTP/1.1 401 ")).toBe(true)
      expect(bodyOf(answer)).toEqual(UNAUTHORIZED)
    }))
})

/** An unknown key of the form issued before keys carried a tag: only the database can tell it, so the shared per-address count applies. */
const BAD_KEY = `crk_${"A".repeat(43)}`
const TOO_MANY = "Rate limit exceeded: more than 5 requests with an invalid key from this address in a minute; wait Retry-After seconds."

/**
 * An address's refusal lasts until its failed-key window (the clock's minute) ends: a test that needs the
 * address refused throughout starts with at least 30 s of the minute left, or the next minute.
 */
const withinOneWindow = MinuteWindow.withinOne()

/** The counts of earlier tests on this database start over (each test starts its own servers, with empty caches). */
const resetCounts = Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.orDie(sql`DELETE FROM rate_limits`))

layer(TestDatabase.layer, { excludeTestServices: true })("failed-key limit per client address", (it) => {
  it.scoped("\"429 | Rate limit exceeded; response has Retry-After header in seconds and retryAfterSeconds in the body\": past FAILED_KEY_LIMIT invalid keys a minute, every request of the address whose key is not valid gets it, without a database query; a valid key is served", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 5 }) }))
      const port = portOf(server.public)
      const key = yield* newKey(server.admin)
      const before = yield* counter(server.admin, "crm_relay_failed_key_refusals_total")
      for (let i = 0; i < 5; i++) {
        const answer = yield* send(port, performList(BAD_KEY))
        expect(answer.status).toBe(401)
        expect(JSON.parse(answer.body)).toEqual(UNAUTHORIZED)
      }
      const refused = yield* send(port, performList(BAD_KEY))
      expect(refused.status).toBe(429)
      const retryAfter = Number(refused.headers["retry-after"])
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect(JSON.parse(refused.body)).toEqual({ error: TOO_MANY, retryAfterSeconds: retryAfter })
      const counted = yield* failedKeyRows("127.0.0.1")
      expect(counted).toBe(6)
      // From now on no invalid key of the address reaches the database.
      for (let i = 0; i < 10; i++) {
        const again = yield* send(port, performList(BAD_KEY))
        expect(again.status).toBe(429)
        const seconds = Number(again.headers["retry-after"])
        expect(seconds).toBeGreaterThanOrEqual(1)
        expect(JSON.parse(again.body)).toEqual({ error: TOO_MANY, retryAfterSeconds: seconds })
      }
      // "A valid key is never refused because of its address" (issue #31): it is served, and counts no failure.
      const valid = yield* send(port, performList(key))
      expect(valid.status).toBe(200)
      expect(yield* failedKeyRows("127.0.0.1")).toBe(counted)
      expect(yield* counter(server.admin, "crm_relay_failed_key_refusals_total")).toBe(before + 11)
    }))

  it.scoped("a burst of concurrent invalid keys from one address, all past the cached verdict at once, costs at most FAILED_KEY_LIMIT + 1 counting queries", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 5 }) }))
      const port = portOf(server.public)
      // Forty connections each send all of a request but its last byte, then the last bytes go out together.
      const request = performList(BAD_KEY)
      const sockets = yield* silentConnections(port, 40)
      yield* Effect.promise(() => Promise.all(sockets.map((socket) => new Promise((written) => socket.write(request.subarray(0, -1), written)))))
      const statuses = yield* Effect.promise(() =>
        Promise.all(sockets.map((socket) =>
          new Promise<number>((answered) => {
            let text = ""
            socket.on("data", (chunk) => {
              text += chunk.toString("latin1")
              if (text.includes("\r\n\r\n")) answered(Number(text.slice(9, 12)))
            })
            socket.write(request.subarray(-1))
          })
        ))
      )
      expect(statuses.filter((status) => status === 401)).toHaveLength(5)
      expect(statuses.filter((status) => status === 429)).toHaveLength(35)
      // Each counting query adds one: the failures past the sixth were refused by this replica's own count.
      // (On PGlite, in-process, each query is answered before the next request is read: the burst needs PostgreSQL.)
      expect(yield* failedKeyRows("127.0.0.1")).toBeLessThanOrEqual(6)
    }))

  it.scoped("valid keys keep their own limit and count no failure; the failed-key count is shared by replicas of one database", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* withinOneWindow
      const a = yield* start(layerServer({ edge: edge({ failedKeyLimit: 5 }) }))
      const b = yield* start(yield* replica(layerServer({ edge: edge({ failedKeyLimit: 5 }) })))
      const key = yield* newKey(a.admin)
      for (let i = 0; i < 8; i++) expect((yield* send(portOf(a.public), performList(key))).status).toBe(200)
      expect(yield* failedKeyRows("127.0.0.1")).toBe(0)
      for (let i = 0; i < 3; i++) expect((yield* send(portOf(a.public), performList(BAD_KEY))).status).toBe(401)
      for (let i = 0; i < 2; i++) expect((yield* send(portOf(b.public), performList(BAD_KEY))).status).toBe(401)
      // The sixth failure of the address, on either replica, is over the shared limit.
      expect((yield* send(portOf(b.public), performList(BAD_KEY))).status).toBe(429)
      expect((yield* send(portOf(a.public), performList(BAD_KEY))).status).toBe(429)
      expect((yield* send(portOf(a.public), performList(key))).status).toBe(200)
    }))

  it.scoped("a spoofed X-Forwarded-For from a peer outside TRUSTED_PROXIES is ignored: the socket's address is counted", () =>
    Effect.gen(function*() {
      yield* resetCounts
      const trusted = Either.getOrThrow(AddressPolicy.parseCidrList("10.0.0.0/8"))
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 5, trustedProxies: trusted }) }))
      const port = portOf(server.public)
      for (let i = 0; i < 5; i++) {
        expect((yield* send(port, performList(BAD_KEY, [["X-Forwarded-For", `198.51.100.${i}`]]))).status).toBe(401)
      }
      expect((yield* send(port, performList(BAD_KEY, [["X-Forwarded-For", "198.51.100.99"]]))).status).toBe(429)
      expect(yield* failedKeyRows("127.0.0.1")).toBe(6)
      expect(yield* failedKeyRows("198.51.100.0")).toBe(0)
    }))

  it.scoped("behind a trusted proxy, the client address is the rightmost X-Forwarded-For hop that is not a trusted proxy", () =>
    Effect.gen(function*() {
      yield* resetCounts
      const trusted = Either.getOrThrow(AddressPolicy.parseCidrList("127.0.0.1/32,10.0.0.0/8"))
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 5, trustedProxies: trusted }) }))
      const port = portOf(server.public)
      // The client prepends a fake hop; the proxies (10.1.2.3, then the peer) appended the real one.
      const chain = "192.0.2.1, 203.0.113.7, 10.1.2.3"
      for (let i = 0; i < 5; i++) expect((yield* send(port, performList(BAD_KEY, [["X-Forwarded-For", chain]]))).status).toBe(401)
      expect((yield* send(port, performList(BAD_KEY, [["X-Forwarded-For", chain]]))).status).toBe(429)
      expect(yield* failedKeyRows("203.0.113.7")).toBe(6)
      // Another client behind the same proxy is not refused.
      expect((yield* send(port, performList(BAD_KEY, [["X-Forwarded-For", "203.0.113.8"]]))).status).toBe(401)
      expect(yield* failedKeyRows("127.0.0.1")).toBe(0)
    }))
})

/** Writes `first` on one keep-alive connection to `port`, then `second` once `between` resolves; when each answer began to arrive (ms after `first`) and the bytes. */
const twoOnOneConnection = (port: number, first: Buffer, second: Buffer, between: () => Promise<unknown>) =>
  Effect.async<{ readonly at: ReadonlyArray<number>; readonly text: string }>((resume) => {
    const socket = Net.connect({ port, host: "127.0.0.1" })
    const at: Array<number> = []
    let text = ""
    let started = 0
    const bound = setTimeout(() => finish(), 30_000)
    const finish = () => {
      clearTimeout(bound)
      socket.destroy()
      resume(Effect.succeed({ at, text }))
    }
    socket.on("error", () => undefined)
    socket.on("close", finish)
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1")
      while (at.length < text.split("HTTP/1.1 ").length - 1) at.push(performance.now() - started)
      if (at.length === 2) finish()
    })
    socket.on("connect", () => {
      started = performance.now()
      socket.write(first)
      void between().then(() => socket.write(second))
    })
  })

const keepAlive = (key: string) => RawHttp.format("GET", "/perform-list", [["Host", "edge.test"], ["Authorization", `Bearer ${key}`]])

layer(TestDatabase.layer, { excludeTestServices: true })("failed-key tarpit", (it) => {
  it.scoped("a refused address's 429 is held FAILED_KEY_HOLD_MS and its connection is not read meanwhile: one request per connection per hold", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 2, failedKeyHoldMs: 1_000 }) }))
      const port = portOf(server.public)
      for (let i = 0; i < 2; i++) expect((yield* send(port, performList(BAD_KEY))).status).toBe(401)
      // The failure over the limit is counted (one query) and answered at once; it makes the address refused.
      expect((yield* send(port, performList(BAD_KEY))).status).toBe(429)
      const before = yield* counter(server.admin, "crm_relay_failed_key_refusals_total")
      // The second request is written once the first was refused (counted): read at once, it would be
      // answered right after the first, not a hold later.
      const firstRefused = Effect.repeat(counter(server.admin, "crm_relay_failed_key_refusals_total"), {
        until: (count) => count > before,
        schedule: Schedule.spaced("20 millis")
      })
      const seen = yield* twoOnOneConnection(port, keepAlive(BAD_KEY), keepAlive(BAD_KEY), () => Effect.runPromise(firstRefused))
      expect(seen.at).toHaveLength(2)
      expect(seen.at[0]!).toBeGreaterThanOrEqual(950)
      expect(seen.at[1]! - seen.at[0]!).toBeGreaterThanOrEqual(950)
      const answers = RawHttp.parseAnswers(Buffer.from(seen.text, "latin1")).answers
      expect(answers.map((answer) => answer.status)).toEqual([429, 429])
      for (const answer of answers) {
        const seconds = Number(answer.headers["retry-after"])
        expect(seconds).toBeGreaterThanOrEqual(1)
        expect(seconds).toBeLessThanOrEqual(60)
        expect(JSON.parse(answer.body)).toEqual({ error: TOO_MANY.replace("5 requests", "2 requests"), retryAfterSeconds: seconds })
      }
      expect(yield* counter(server.admin, "crm_relay_failed_key_refusals_total")).toBe(before + 2)
      // A connection that leaves during its hold costs nothing more, and the port keeps serving. It leaves
      // once its request was refused (counted): left sooner, on a busy machine the server may never read it.
      const left = yield* Effect.acquireUseRelease(
        Effect.async<Net.Socket>((resume) => {
          const socket = Net.connect({ port, host: "127.0.0.1" })
          socket.on("error", () => undefined)
          socket.on("connect", () => socket.write(keepAlive(BAD_KEY), () => resume(Effect.succeed(socket))))
        }),
        (socket) =>
          Effect.gen(function*() {
            const received: Array<Buffer> = []
            socket.on("data", (chunk: Buffer) => received.push(chunk))
            yield* Effect.repeat(counter(server.admin, "crm_relay_failed_key_refusals_total"), {
              until: (count) => count > before + 2,
              schedule: Schedule.spaced("20 millis")
            })
            return Buffer.concat(received).toString("latin1")
          }),
        (socket) => Effect.sync(() => socket.destroy())
      )
      expect(left).toBe("")
      const later = yield* send(port, performList(BAD_KEY))
      expect(later.status).toBe(429)
      expect(yield* counter(server.admin, "crm_relay_failed_key_refusals_total")).toBe(before + 4)
    }))
})

/** A server with the Integrations area's listener, under `guards`. */
const withPortal = (guards: PublicEdge.PublicEdge) =>
  start(layerServer({ edge: guards, portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.none() } }))

const sessionRequest = RawHttp.format("GET", "/api/session", [["Host", "portal.test"]])

layer(TestDatabase.layer, { excludeTestServices: true })("Integrations area listener guards", (it) => {
  it.scoped("it faces browsers: a silent connection is closed at the head deadline, a slow head is answered 400, an idle keep-alive is closed — and counted", () =>
    Effect.gen(function*() {
      const server = yield* withPortal(edge({ headTimeoutMs: 400, requestTimeoutMs: 2_000, keepAliveTimeoutMs: 300 }))
      const port = portOf(server.portal)
      const before = yield* counter(server.admin, "crm_relay_portal_timeouts_total", "{phase=\"head\"}")
      const silent = yield* watch(port, [], 0, 20_000)
      expect(silent.closed).toBe(true)
      expect(silent.afterMs).toBeGreaterThanOrEqual(350)
      expect(silent.text).toBe("")
      const head = "GET /api/session HTTP/1.1\r\nHost: portal.test\r\nX-Slow: " + "a".repeat(500)
      const slow = yield* watch(port, head.split(""), 20, 20_000)
      expect(slow.closed).toBe(true)
      expect(slow.afterMs).toBeLessThan(head.length * 20)
      expect(slow.text.startsWith("HTTP/1.1 400 ")).toBe(true)
      expect(bodyOf(slow.text)).toEqual({ error: "The request did not arrive in time." })
      expect(yield* counter(server.admin, "crm_relay_portal_timeouts_total", "{phase=\"head\"}")).toBe(before + 2)
      const idle = yield* watch(port, [sessionRequest], 0, 20_000)
      expect(idle.closed).toBe(true)
      expect(idle.text.startsWith("HTTP/1.1 401 ")).toBe(true)
      expect(idle.afterMs).toBeLessThan(4_500)
    }))

  it.scoped("past PORTAL_MAX_CONNECTIONS a connection is closed at once and counted; the held ones, the public port and the internal port keep working", () =>
    Effect.gen(function*() {
      const server = yield* withPortal(edge({ portalMaxConnections: 2, headTimeoutMs: 20_000, requestTimeoutMs: 30_000 }))
      const port = portOf(server.portal)
      const before = yield* counter(server.admin, "crm_relay_portal_connections_refused_total")
      const held = yield* silentConnections(port, 2)
      const refused = yield* watch(port, [sessionRequest], 0, 20_000)
      expect(refused.closed).toBe(true)
      expect(refused.text).toBe("")
      expect(yield* counter(server.admin, "crm_relay_portal_connections_refused_total")).toBe(before + 1)
      // The public port has its own budget.
      expect((yield* send(portOf(server.public), performList("crk_x"))).status).toBe(401)
      expect((yield* adminRequest(server.admin, "GET", "/v1/accounts")).status).toBe(200)
      const answer = yield* Effect.async<string>((resume) => {
        const socket = held[0]!
        const chunks: Array<Buffer> = []
        socket.on("data", (chunk) => chunks.push(chunk))
        socket.on("close", () => resume(Effect.succeed(Buffer.concat(chunks).toString("latin1"))))
        socket.write(RawHttp.format("GET", "/api/session", [["Host", "portal.test"], ["Connection", "close"]]))
      })
      expect(answer.startsWith("HTTP/1.1 401 ")).toBe(true)
    }))
})

const capture = LogCapture.make()
layer(Layer.merge(TestDatabase.layer, capture.layer), { excludeTestServices: true })("refusals in the access log", (it) => {
  it.scoped("a flood of 429s from one address writes one access line per minute, naming the address", () =>
    Effect.gen(function*() {
      yield* withinOneWindow
      const server = yield* start(layerServer({ edge: edge({ failedKeyLimit: 2 }) }))
      const port = portOf(server.public)
      for (let i = 0; i < 12; i++) yield* send(port, performList(BAD_KEY))
      const access = (yield* LogCapture.ofKind(capture, "access")).filter((line) => line["api"] === "public")
      expect(access.filter((line) => line["status"] === 401)).toHaveLength(2)
      const refused = access.filter((line) => line["status"] === 429)
      expect(refused).toHaveLength(1)
      expect(refused[0]).toMatchObject({ client_address: "127.0.0.1", refusals_left_out: 0 })
    }))
})
