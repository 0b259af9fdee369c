import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Option, TestClock } from "effect"
import { gzipSync } from "node:zlib"
import { DnsResolver } from "../src/DnsResolver.js"
import { Egress, EgressTimeout, MAX_BODY_BYTES } from "../src/Egress.js"
import { eventually, expectOneSentence } from "./support/egressAssertions.js"
import { type Handler, httpsServer, LOOPBACK_DNS, material, ok, silentListener, testEgress } from "./support/egressServers.js"

const egressLayer = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] })
const fastDeadline = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"], deadline: "300 millis" })

const sendTo = (url: string) => Effect.flatMap(Egress, (egress) => egress.send({ method: "POST", url, body: "{}" }))

/** Streams 64 KiB chunks until the client goes away, counting what it wrote. */
const endless = (stats: { written: number; closed: boolean }): Handler => (_, res) => {
  res.writeHead(200, { "content-type": "application/octet-stream" })
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  res.on("close", () => {
    stats.closed = true
  })
  const pump = () => {
    while (!res.destroyed) {
      stats.written += chunk.length
      if (!res.write(chunk)) {
        res.once("drain", pump)
        return
      }
    }
  }
  pump()
}

/** Sends the headers and the start of a body, then stalls. */
const stallBody: Handler = (_, res) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.write("{\"id\":")
}

describe("Egress exchange rules", () => {
  it.live("Transport rule: redirects are not followed; the 3xx comes back to the caller and Location is never requested", () =>
    Effect.gen(function*() {
      const target = yield* httpsServer(ok)
      for (const status of [301, 302, 303, 307, 308]) {
        const redirecting = yield* httpsServer((_, res) => {
          res.writeHead(status, { location: `https://receiver.test:${target.port}/landing` })
          res.end()
        })
        const response = yield* sendTo(`https://bridge.test:${redirecting.port}/capabilities`)
        expect(response.status).toBe(status)
        expect(response.headers.location).toBe(`https://receiver.test:${target.port}/landing`)
        expect(redirecting.requests).toHaveLength(1)
      }
      expect(target.connections()).toBe(0)
      expect(target.requests).toHaveLength(0)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Transport rule: proxies are unsupported; HTTP(S)_PROXY and friends have no effect", () =>
    Effect.gen(function*() {
      const proxy = yield* silentListener()
      const target = yield* httpsServer(ok)
      const proxyUrl = `http://127.0.0.1:${proxy.port}`
      const names = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NODE_USE_ENV_PROXY"]
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const saved = names.map((name) => [name, process.env[name]] as const)
          for (const name of names) process.env[name] = name === "NODE_USE_ENV_PROXY" ? "1" : proxyUrl
          return saved
        }),
        (saved) =>
          Effect.sync(() => {
            for (const [name, value] of saved) {
              if (value === undefined) delete process.env[name]
              else process.env[name] = value
            }
          })
      )
      // The Layer is built after the variables are set, so neither construction nor sending could miss them.
      const response = yield* sendTo(`https://bridge.test:${target.port}/capabilities`).pipe(Effect.provide(egressLayer))
      expect(response.status).toBe(200)
      expect(target.requests).toHaveLength(1)
      expect(proxy.connections()).toBe(0)
    }).pipe(Effect.scoped))

  it.live("Transport rule: responses are uncompressed; Accept-Encoding: identity is sent", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      yield* sendTo(`https://bridge.test:${server.port}/capabilities`)
      expect(server.requests[0]?.headers["accept-encoding"]).toBe("identity")
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Transport rule: a gzip (or any non-identity) Content-Encoding is refused", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((request, res) => {
        const encoding = request.url.slice(1)
        res.writeHead(200, { "content-type": "application/json", "content-encoding": encoding })
        res.end(encoding === "gzip" ? gzipSync("{\"ok\":true}") : "{\"ok\":true}")
      })
      for (const encoding of ["gzip", "br", "deflate", "identity,gzip"]) {
        const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/${encoding}`))
        expect(error).toMatchObject({ _tag: "EgressEncodingRefused", host: "bridge.test", contentEncoding: encoding })
        expectOneSentence(error.message)
      }
      // "identity" is no encoding at all.
      expect((yield* sendTo(`https://bridge.test:${server.port}/identity`)).status).toBe(200)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: a response that streams forever is cut at 1 MiB and the connection dropped", () =>
    Effect.gen(function*() {
      const stats = { written: 0, closed: false }
      const server = yield* httpsServer(endless(stats))
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/availability`))
      expect(error).toMatchObject({ _tag: "EgressResponseTooLarge", host: "bridge.test", limitBytes: MAX_BODY_BYTES })
      expect(error.message).toBe(
        "The response from bridge.test is larger than the 1048576-byte (1 MiB) limit, so it was not read further."
      )
      // The server notices the client went away and stops; what it wrote is bounded by socket buffers.
      expect(yield* eventually(() => stats.closed)).toBe(true)
      const writtenAtClose = stats.written
      yield* Effect.sleep("100 millis")
      expect(stats.written).toBe(writtenAtClose)
      // About 1.1 MiB on loopback; the margin is for kernel socket buffers, not for reading on.
      expect(writtenAtClose).toBeLessThan(4 * MAX_BODY_BYTES)
      expect(server.openConnections()).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: a response declaring more than 1 MiB is refused without reading it", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((_, res) => {
        res.writeHead(200, { "content-length": String(MAX_BODY_BYTES + 1) })
        res.write(Buffer.alloc(1024))
      })
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/availability`))
      expect(error).toMatchObject({ _tag: "EgressResponseTooLarge", limitBytes: MAX_BODY_BYTES })
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: a response of exactly 1 MiB is read whole", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((_, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        // Chunked (no Content-Length), so the streaming count is what decides.
        res.write(Buffer.alloc(MAX_BODY_BYTES / 2, 0x62))
        res.end(Buffer.alloc(MAX_BODY_BYTES / 2, 0x62))
      })
      const response = yield* sendTo(`https://bridge.test:${server.port}/availability`)
      expect(response.body.byteLength).toBe(MAX_BODY_BYTES)
      expect(response.body.every((byte) => byte === 0x62)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("Limits: the deadline covers reading the body — a body that stalls times out at the deadline", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(stallBody)
      const started = Date.now()
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/contacts/upsert`))
      const elapsed = Date.now() - started
      expect(error).toBeInstanceOf(EgressTimeout)
      expect(error).toMatchObject({ host: "bridge.test", timeoutMs: 300 })
      expect(error.message).toBe(
        "The exchange with bridge.test did not complete within 0.3 s, including reading the response."
      )
      // Not before the deadline; how late after it depends on the machine's load, so no upper bound is asserted here
      // (EgressDeadlines.test proves on the TestClock that a deadline fires exactly when due).
      expect(elapsed).toBeGreaterThanOrEqual(290)
      // The stalled connection is dropped, not returned to the pool.
      expect(yield* eventually(() => server.openConnections() === 0)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(fastDeadline)))

  it.live("Limits: a server that never answers times out at the deadline", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(() => undefined)
      const started = Date.now()
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/leads`))
      expect(error).toBeInstanceOf(EgressTimeout)
      expect(error).toMatchObject({ timeoutMs: 300 })
      expect(Date.now() - started).toBeGreaterThanOrEqual(290)
      expect(yield* eventually(() => server.openConnections() === 0)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(fastDeadline)))

  it.effect("Limits: the default total deadline per exchange is 10 seconds", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const server = yield* httpsServer((request, res, req) => {
        stallBody(request, res, req)
        Deferred.unsafeDone(started, Exit.void)
      })
      const egress = yield* Egress
      const fiber = yield* Effect.fork(egress.send({ method: "POST", url: `https://bridge.test:${server.port}/leads` }))
      yield* Deferred.await(started)
      yield* TestClock.adjust("9999 millis")
      expect(yield* Fiber.poll(fiber)).toEqual(Option.none())
      yield* TestClock.adjust("1 millis")
      const error = yield* Effect.flip(Fiber.join(fiber))
      expect(error).toBeInstanceOf(EgressTimeout)
      expect(error).toMatchObject({ timeoutMs: 10_000 })
    }).pipe(
      Effect.scoped,
      // The product's own default deadline, not the patient one of testEgress.
      Effect.provide(Egress.layerWith({ extraCa: material.ca, allowPrivate: ["127.0.0.1/32"] }).pipe(
        Layer.provide(DnsResolver.layerStatic(LOOPBACK_DNS))
      ))
    ))

  it.live("a connection refused is a network error (Transient for the bridge client)", () =>
    Effect.gen(function*() {
      // Nothing listens on 127.0.0.1:1 (privileged, unused).
      const error = yield* Effect.flip(sendTo("https://bridge.test:1/leads"))
      expect(error).toMatchObject({ _tag: "EgressNetworkError", kind: "connect" })
      expect(error.message).toBe(
        "Could not complete the exchange with bridge.test: the connection was refused (ECONNREFUSED)."
      )
    }).pipe(Effect.provide(egressLayer)))

  it.live("a connection the server resets mid-response is a network error", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((_, res) => {
        res.writeHead(200, { "content-length": "100" })
        res.write("partial")
        res.socket?.destroy()
      })
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/leads`))
      expect(error._tag).toBe("EgressNetworkError")
      expectOneSentence(error.message)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))
  it.live("a caller that interrupts the exchange drops its connection instead of pooling it mid-body", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const server = yield* httpsServer((request, res, req) => {
        stallBody(request, res, req)
        Deferred.unsafeDone(started, Exit.void)
      })
      const fiber = yield* Effect.fork(sendTo(`https://bridge.test:${server.port}/leads`))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      expect(yield* eventually(() => server.openConnections() === 0)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("concurrent exchanges with one origin all complete over the shared pool", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer((request, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(request.body)
      })
      const bodies = Array.from({ length: 50 }, (_, i) => JSON.stringify({ i }))
      const egress = yield* Egress
      const responses = yield* Effect.forEach(
        bodies,
        (body) => egress.send({ method: "POST", url: `https://bridge.test:${server.port}/leads`, body }),
        { concurrency: "unbounded" }
      )
      expect(responses.map((r) => Buffer.from(r.body).toString("utf8"))).toEqual(bodies)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))
  it.live("Limits: name resolution counts against the deadline; a resolver that never answers times out", () =>
    Effect.gen(function*() {
      const server = yield* httpsServer(ok)
      const started = Date.now()
      const error = yield* Effect.flip(sendTo(`https://bridge.test:${server.port}/leads`)).pipe(
        Effect.provide(
          Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], deadline: "300 millis" }).pipe(
            Layer.provide(Layer.succeed(DnsResolver, DnsResolver.of({ resolve: () => Effect.never })))
          )
        )
      )
      expect(error).toBeInstanceOf(EgressTimeout)
      expect(error).toMatchObject({ timeoutMs: 300 })
      expect(Date.now() - started).toBeGreaterThanOrEqual(290)
      expect(server.connections()).toBe(0)
    }).pipe(Effect.scoped))
})
