/**
 * Bodies over the cap on every listener, sent the way a naive client sends
 * them: the whole body written in chunks, the socket not read until then.
 * The server answers 413 with the Error object and `Connection: close` as
 * soon as it knows, and lingers (reads and discards what still arrives) for
 * a bounded time, so that the client reads the answer instead of a reset.
 * One server: the public port, the internal port and the Integrations area.
 */
import { expect, layer } from "@effect/vitest"
import { RawHttp } from "@crm-relay/testing"
import { TestDatabase } from "@crm-relay/store"
import { Effect, Fiber, Layer, Option } from "effect"
import * as Net from "node:net"
import { LINGER_MS } from "../src/http/LingeringClose.js"
import { defaultEdge, Listening } from "../src/http/Server.js"
import { ADMIN_TOKEN, adminRequest, layerServer } from "./support/TestServer.js"

/**
 * The public port's and the Integrations area's connection budget: room for the side-by-side clients,
 * each of whose connections may still be draining (and counted) after its client has moved on.
 */
const BUDGET = 64
/** Longer than the linger bound, so that a close at the bound is the linger's and not Node's request deadline. */
const REQUEST_TIMEOUT_MS = 60_000

const TOO_LARGE = {
  error: "The request body is larger than 65536 bytes, the most this server accepts; send a body of at most 65536 bytes."
}
const MiB = 1024 * 1024
const SIZES = [2 * MiB, 8 * MiB]

const ServerLive = layerServer({
  edge: {
    ...defaultEdge,
    limits: { ...defaultEdge.limits, requestTimeoutMs: REQUEST_TIMEOUT_MS, maxConnections: BUDGET },
    portalMaxConnections: BUDGET
  },
  portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.none() }
}).pipe(Layer.provideMerge(TestDatabase.layer))

const ports = Effect.map(Listening, (l) => ({
  public: Option.getOrThrow(l.publicApi).port,
  admin: l.internalApi.port,
  adminUrl: l.internalApi.url,
  portal: Option.getOrThrow(l.portal).port
}))

/** What a naive client saw: whether its writes all went through, then every answer it read until the close. */
interface Naive {
  readonly writeError: string | undefined
  readonly sent: number
  readonly answers: ReadonlyArray<RawHttp.RawAnswer>
  readonly closed: boolean
}

/**
 * Writes `head` then `body.size` bytes of `a` in 64 KiB chunks (each chunk framed when `chunked`),
 * reading nothing until all is written, then reads until the server closes (or a bound against a hang).
 */
const naive = (port: number, head: string, body: { readonly size: number; readonly chunked?: boolean }) =>
  Effect.async<Naive>((resume) => {
    const socket = Net.connect({ port, host: "127.0.0.1" })
    const received: Array<Buffer> = []
    let writeError: string | undefined
    let sent = 0
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(bound)
      socket.destroy()
      resume(Effect.succeed({ writeError, sent, answers: RawHttp.parseAnswers(Buffer.concat(received)).answers, closed }))
    }
    const bound = setTimeout(() => finish(false), 60_000)
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("error", (error: NodeJS.ErrnoException) => {
      writeError ??= error.code ?? error.message
      finish(true)
    })
    socket.on("close", () => finish(true))
    socket.on("connect", async () => {
      // A naive client reads nothing until its request is written.
      socket.pause()
      socket.write(head)
      const chunk = Buffer.alloc(64 * 1024, 0x61)
      while (sent < body.size && !socket.destroyed) {
        const framed = body.chunked === true
          ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")])
          : chunk
        const flushed = socket.write(framed)
        sent += chunk.length
        if (!flushed) await new Promise((drained) => socket.once("drain", drained).once("close", drained))
      }
      if (body.chunked === true && !socket.destroyed) socket.write("0\r\n\r\n")
      socket.resume()
    })
  })

const head = (method: string, target: string, headers: ReadonlyArray<readonly [string, string]>, size: number) =>
  `${method} ${target} HTTP/1.1\r\nHost: edge.test\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}Content-Length: ${size}\r\n\r\n`

/** Sends `data` and answers all that comes back until the server closes. */
const rawText = (port: number, data: string) =>
  Effect.async<string>((resume) => {
    const socket = Net.connect({ port, host: "127.0.0.1" }, () => socket.write(data))
    const received: Array<Buffer> = []
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("error", () => undefined)
    socket.on("close", () => resume(Effect.succeed(Buffer.concat(received).toString("latin1"))))
  })

/** Expects the client to have written `size` bytes and read the 413 with the Error object and `Connection: close`. */
const expectTooLarge = (what: string, seen: Naive, size: number) => {
  expect([what, seen.writeError, seen.sent >= size]).toEqual([what, undefined, true])
  expect([what, seen.answers.length, seen.answers[0]?.status, seen.answers[0]?.headers["connection"]]).toEqual([what, 1, 413, "close"])
  expect([what, JSON.parse(seen.answers[0]!.body)]).toEqual([what, TOO_LARGE])
}

const newKey = (admin: string) =>
  Effect.gen(function*() {
    const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name: "Body limit" })).json as { id: string }
    const key = ((yield* adminRequest(admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { key: string }).key
    return { accountId: account.id, key }
  })

/** The value of the counter `name` on the internal port's GET /metrics, 0 when absent. */
const counter = (admin: string, name: string) =>
  Effect.map(adminRequest(admin, "GET", "/metrics"), (answer) => {
    const line = answer.text.split("\n").find((l) => l.startsWith(`${name} `))
    return line === undefined ? 0 : Number(line.split(" ").pop())
  })

layer(ServerLive, { excludeTestServices: true })("request bodies over the cap", (it) => {
  it.effect("\"send the 413 ... then keep reading and discarding\" (RFC 9112 §9.6): an oversized body on each public route, sent by a raw-socket client: the client reads the 413 and its Error object every time", () =>
    Effect.gen(function*() {
      const p = yield* ports
      const { key } = yield* newKey(p.adminUrl)
      const refusedBefore = yield* counter(p.adminUrl, "crm_relay_public_connections_refused_total")
      const auth = ["Authorization", `Bearer ${key}`] as const
      const json = ["Content-Type", "application/json"] as const
      const routes: ReadonlyArray<readonly [string, string, ReadonlyArray<readonly [string, string]>]> = [
        ["POST", "/subscribe", [auth, json]],
        ["DELETE", "/subscribe/0f8fad5b-d9cb-469f-a165-70867728950e", [auth]],
        ["GET", "/perform-list", [auth]],
        ["POST", "/unknown", [json]]
      ]
      // The routes side by side, ten times each at both sizes: the server is busy while it answers.
      const seen = yield* Effect.forEach(routes, ([method, path, headers]) =>
        Effect.forEach(Array.from({ length: 10 }, (_, i) => SIZES[i % 2]!), (size, i) =>
          Effect.map(naive(p.public, head(method, path, headers, size), { size }), (seen) =>
            [`${method} ${path} #${i} ${size}`, seen, size] as const)), { concurrency: "unbounded" })
      // No connection was refused for the budget (a refused one would fail its write too).
      expect(yield* counter(p.adminUrl, "crm_relay_public_connections_refused_total")).toBe(refusedBefore)
      for (const [what, naive, size] of seen.flat()) expectTooLarge(what, naive, size)
      // A client that asks first (Expect: 100-continue) is refused before it sends the body: no 100 Continue.
      const asked = yield* rawText(p.public, head("POST", "/subscribe", [auth, json, ["Expect", "100-continue"]], 8 * MiB))
      expect(asked.startsWith("HTTP/1.1 413 ")).toBe(true)
      expect(RawHttp.parseAnswers(Buffer.from(asked, "latin1")).answers.map((a) => [a.status, JSON.parse(a.body)])).toEqual([[413, TOO_LARGE]])
      // Without a key the body is refused all the same: its size is known before any key is checked.
      expectTooLarge("POST /subscribe without a key", yield* naive(p.public, head("POST", "/subscribe", [json], 2 * MiB), { size: 2 * MiB }), 2 * MiB)
      // The port keeps serving.
      const after = yield* Effect.promise(() =>
        RawHttp.exchange(p.public, RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`]]), { expect: 1 }))
      expect(after.answers[0]?.status).toBe(200)
    }))

  it.effect("a chunked body over the cap (no length to judge it by) is answered 413 with the Error object on the public and internal ports, and the client reads it", () =>
    Effect.gen(function*() {
      const p = yield* ports
      const { key } = yield* newKey(p.adminUrl)
      const chunked = ["Transfer-Encoding", "chunked"] as const
      const json = ["Content-Type", "application/json"] as const
      const chunkedHead = (method: string, path: string, headers: ReadonlyArray<readonly [string, string]>) =>
        `${method} ${path} HTTP/1.1\r\nHost: edge.test\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`
      for (let i = 0; i < 3; i++) {
        const subscribe = yield* naive(p.public, chunkedHead("POST", "/subscribe", [["Authorization", `Bearer ${key}`], json, chunked]), { size: 2 * MiB, chunked: true })
        expectTooLarge(`public #${i}`, subscribe, 2 * MiB)
        const account = yield* naive(p.admin, chunkedHead("POST", "/v1/accounts", [["Authorization", `Bearer ${ADMIN_TOKEN}`], json, chunked]), { size: 2 * MiB, chunked: true })
        expectTooLarge(`internal #${i}`, account, 2 * MiB)
      }
    }))

  it.effect("the internal port and the Integrations area share the body limit: the client reads the 413 and its Error object every time; an in-call route answers its own \"rejected\" shape", () =>
    Effect.gen(function*() {
      const p = yield* ports
      const { accountId } = yield* newKey(p.adminUrl)
      const json = ["Content-Type", "application/json"] as const
      for (let i = 0; i < 10; i++) {
        const size = SIZES[i % 2]!
        const internal = yield* naive(p.admin, head("POST", "/v1/accounts", [["Authorization", `Bearer ${ADMIN_TOKEN}`], json], size), { size })
        expectTooLarge(`internal #${i}`, internal, size)
        const portal = yield* naive(p.portal, head("POST", "/api/session", [json], size), { size })
        expectTooLarge(`portal #${i}`, portal, size)
        const unknown = yield* naive(p.portal, head("PUT", "/nowhere", [json], size), { size })
        expectTooLarge(`portal unknown #${i}`, unknown, size)
      }
      // The voice agent acts on `rejected` mid-call, not on a status: its routes keep their shape, and close.
      const inCall = yield* naive(
        p.admin,
        head("POST", `/v1/accounts/${accountId}/tenants/t-1/contacts/search`, [["Authorization", `Bearer ${ADMIN_TOKEN}`], json], 2 * MiB),
        { size: 2 * MiB }
      )
      expect([inCall.writeError, inCall.answers.map((a) => [a.status, a.headers["connection"], JSON.parse(a.body)])]).toEqual([
        undefined,
        [[200, "close", { ok: false, reason: "rejected", message: TOO_LARGE.error }]]
      ])
    }))

  it.effect("the lingering is bounded: a client that keeps trickling body bytes reads the 413 at once and is closed after LINGER_MS, well before the request deadline", () =>
    Effect.gen(function*() {
      const p = yield* ports
      const seen = yield* trickle(p.public)
      expect(seen.closed).toBe(true)
      expect(seen.text.startsWith("HTTP/1.1 413 ")).toBe(true)
      expect(JSON.parse(seen.text.slice(seen.text.indexOf("\r\n\r\n") + 4))).toEqual(TOO_LARGE)
      // The answer came at once; the close came at the bound, not at the request deadline.
      expect(seen.answeredAfterMs).toBeLessThan(LINGER_MS)
      expect(seen.closedAfterMs).toBeGreaterThanOrEqual(LINGER_MS - 100)
      expect(seen.closedAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS / 2)
      expect(seen.trickled).toBeGreaterThan(0)
    }))

  it.effect("lingering connections count against the connection budget: with PUBLIC_MAX_CONNECTIONS of them lingering, the next connection is refused and counted; once the bound passes they are closed and the port serves again", () =>
    Effect.gen(function*() {
      const p = yield* ports
      const before = yield* counter(p.adminUrl, "crm_relay_public_connections_refused_total")
      const lingering = yield* Effect.forEach(Array.from({ length: BUDGET }), () => trickleStarted(p.public), { concurrency: "unbounded" })
      // Each was answered, and is lingering (still open, still trickling).
      const refused = yield* Effect.promise(() =>
        RawHttp.exchange(p.public, RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Connection", "close"]]), { expect: 1, timeoutMillis: 20_000 }))
      expect([refused.closed, refused.answers]).toEqual([true, []])
      expect(yield* counter(p.adminUrl, "crm_relay_public_connections_refused_total")).toBe(before + 1)
      const closed = yield* Effect.forEach(lingering, (l) => l.closed, { concurrency: "unbounded" })
      expect(closed.every((c) => c.closed && c.text.startsWith("HTTP/1.1 413 "))).toBe(true)
      const served = yield* Effect.promise(() =>
        RawHttp.exchange(p.public, RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Connection", "close"]]), { expect: 1, timeoutMillis: 20_000 }))
      expect(served.answers[0]?.status).toBe(401)
    }))
})

/** What a trickling client saw. */
interface Trickled {
  readonly text: string
  readonly closed: boolean
  readonly answeredAfterMs: number
  readonly closedAfterMs: number
  /** Body bytes it sent after the answer arrived. */
  readonly trickled: number
}

/**
 * A client that declares an 8 MiB body to POST /subscribe and sends a byte of it every
 * 50 ms for ever, reading as it goes; `answered` completes at its answer, `closed` when the server closes.
 */
const trickleStarted = (port: number) =>
  Effect.gen(function*() {
    const answered = yield* Effect.makeLatch(false)
    const closed = Effect.async<Trickled>((resume) => {
      const started = performance.now()
      const received: Array<Buffer> = []
      let answeredAt: number | undefined
      let trickled = 0
      // It ignores the server's FIN and keeps sending, as an attacker does.
      const socket = Net.connect({ port, host: "127.0.0.1", allowHalfOpen: true })
      let done = false
      const finish = (closed: boolean) => {
        if (done) return
        done = true
        clearInterval(writer)
        clearTimeout(bound)
        socket.destroy()
        resume(Effect.succeed({
          text: Buffer.concat(received).toString("latin1"),
          closed,
          answeredAfterMs: (answeredAt ?? Number.POSITIVE_INFINITY) - started,
          closedAfterMs: performance.now() - started,
          trickled
        }))
      }
      const bound = setTimeout(() => finish(false), 60_000)
      let writer: NodeJS.Timeout | undefined
      socket.on("data", (chunk) => {
        received.push(chunk)
        if (answeredAt === undefined && RawHttp.parseAnswers(Buffer.concat(received)).answers.length > 0) {
          answeredAt = performance.now()
          answered.unsafeOpen()
        }
      })
      socket.on("error", () => undefined)
      socket.on("close", () => finish(true))
      socket.on("connect", () => {
        socket.write(head("POST", "/subscribe", [["Content-Type", "application/json"]], 8 * MiB))
        writer = setInterval(() => {
          if (socket.destroyed || !socket.writable) return
          socket.write("a")
          if (answeredAt !== undefined) trickled++
        }, 50)
      })
    })
    const fiber = yield* Effect.fork(closed)
    yield* answered.await
    return { closed: Fiber.join(fiber) }
  })

/** `trickleStarted`, until the server closes. */
const trickle = (port: number) => Effect.flatMap(trickleStarted(port), (t) => t.closed)
