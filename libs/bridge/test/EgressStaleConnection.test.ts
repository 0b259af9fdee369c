/**
 * A kept-alive connection the server closes just as the client reuses it:
 * the request failed before any answer byte, so the server did not act on it,
 * and egress sends it again once on a fresh connection. Bridge pushes (the
 * body read) and webhook deliveries (the body discarded) both go through it.
 *
 * Which pooled connection undici picks for a request is its own business, so
 * each test writes until the server has seen a connection reused (a few
 * writes at most) and then checks every request the server read.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Egress, type EgressError } from "../src/Egress.js"
import { LOOPBACK_DNS, testEgress } from "./support/egressServers.js"
import { keepAliveServer, type RawRequest } from "./support/keepAliveServer.js"

const egressLayer = testEgress(LOOPBACK_DNS, { allowPrivate: ["127.0.0.1/32"] })

const key = (n: number) => n.toString(16).padStart(64, "0")
const bodyOf = (n: number) => JSON.stringify({ lead: n, idempotency_key: key(n) })

const write = (port: number, n: number, responseBody: "read" | "discard") =>
  Effect.flatMap(Egress, (egress) =>
    egress.send({
      method: "POST",
      url: `https://bridge.test:${port}/leads`,
      headers: { "content-type": "application/json", "idempotency-key": key(n) },
      body: bodyOf(n),
      options: { responseBody }
    }))

/** Writes 1, 2, 3... until the server has read a request on a reused connection (at most 10 writes). */
const writeUntilReused = (
  server: { readonly port: number; readonly requests: ReadonlyArray<RawRequest> },
  responseBody: "read" | "discard" = "read"
) =>
  Effect.gen(function*() {
    const outcomes: Array<Either.Either<number, EgressError>> = []
    while (outcomes.length < 10 && !server.requests.some((r) => r.nth > 1)) {
      outcomes.push(yield* Effect.either(Effect.map(write(server.port, outcomes.length + 1, responseBody), (r) => r.status)))
    }
    expect(server.requests.some((r) => r.nth > 1)).toBe(true)
    return outcomes
  })

/** The tag of the last write's failure, if it failed. */
const lastFailure = (outcomes: ReadonlyArray<Either.Either<number, EgressError>>) => {
  const last = outcomes.at(-1)
  return last !== undefined && Either.isLeft(last) ? last.left._tag : undefined
}

/** The requests the server read for write `n`. */
const readFor = (requests: ReadonlyArray<RawRequest>, n: number) =>
  requests.filter((r) => r.headers["idempotency-key"] === key(n)).map((r) => ({ nth: r.nth, body: r.body }))

describe("Egress: a kept-alive connection closed as it is reused", () => {
  for (const responseBody of ["read", "discard"] as const) {
    it.live(
      `the request that failed before any answer byte is sent again once on a fresh connection and succeeds; the write keeps its Idempotency-Key (Idempotency rule 1: "Replaying a write returns the original record") — body ${responseBody}`,
      () =>
        Effect.gen(function*() {
          const server = yield* keepAliveServer((request) => request.nth === 1 ? "answer" : "close")
          const outcomes = yield* writeUntilReused(server, responseBody)
          expect(outcomes.every((o) => Either.isRight(o) && o.right === 200)).toBe(true)
          const last = outcomes.length
          // Every write before went out once, on a fresh connection, and was answered.
          for (let n = 1; n < last; n++) expect(readFor(server.requests, n)).toEqual([{ nth: 1, body: bodyOf(n) }])
          // The last one: on a reused connection closed without a byte of answer, then the same write on a connection of its own.
          expect(readFor(server.requests, last)).toEqual([{ nth: 2, body: bodyOf(last) }, { nth: 1, body: bodyOf(last) }])
          expect(server.requests.at(-1)?.headers["idempotency-key"]).toBe(key(last))
        }).pipe(Effect.scoped, Effect.provide(egressLayer))
    )
  }

  it.live("a failure after answer bytes began is not sent again: the server may have acted on the request", () =>
    Effect.gen(function*() {
      const server = yield* keepAliveServer((request) => request.nth === 1 ? "answer" : "close_mid_answer")
      const outcomes = yield* writeUntilReused(server)
      const last = outcomes.length
      expect(lastFailure(outcomes)).toBe("EgressNetworkError")
      expect(readFor(server.requests, last)).toEqual([{ nth: 2, body: bodyOf(last) }])
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("the second failure is not sent again: once on a fresh connection is the limit", () =>
    Effect.gen(function*() {
      const closed = new Set<string>()
      const server = yield* keepAliveServer((request) => {
        const k = request.headers["idempotency-key"] ?? ""
        if (request.nth === 1 && !closed.has(k)) return "answer"
        closed.add(k)
        return "close"
      })
      const outcomes = yield* writeUntilReused(server)
      const last = outcomes.length
      expect(lastFailure(outcomes)).toBe("EgressNetworkError")
      expect(readFor(server.requests, last)).toEqual([{ nth: 2, body: bodyOf(last) }, { nth: 1, body: bodyOf(last) }])
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))

  it.live("a fresh connection closed before any answer byte is not sent again: that is the server failing, not a stale connection", () =>
    Effect.gen(function*() {
      const server = yield* keepAliveServer(() => "close")
      const error = yield* Effect.flip(write(server.port, 1, "read"))
      expect(error._tag).toBe("EgressNetworkError")
      expect(server.requests).toHaveLength(1)
    }).pipe(Effect.scoped, Effect.provide(egressLayer)))
})
