/**
 * GET /perform-list is answered from the request event, before the router
 * (src/http/public/PerformList.ts), when the request is plain: HTTP/1.1 with
 * a Host, no body, a query the handler decodes, nothing unanswered before it
 * on its connection. Whichever path answers, the client sees the same
 * answer, and the access line, the metrics and the order of a connection's
 * answers are kept. An HTTP/1.0 request always takes the router's path.
 */
import { describe, expect, it } from "@effect/vitest"
import { Eventually, RawHttp } from "@crm-relay/testing"
import { Effect, Layer } from "effect"
import * as LogCapture from "./support/LogCapture.js"
import { accountWithKey, bearer, expectAccessLine, request, requestsCounted, TestServerLive, urls } from "./support/TestServer.js"

const capture = LogCapture.make()
const ServerWithLogs = TestServerLive.pipe(Layer.provide(capture.layer))

const publicPort = Effect.map(urls, (u) => Number(new URL(u.public).port))

const exchange = (data: Buffer, expect: number) =>
  Effect.flatMap(publicPort, (port) => Effect.promise(() => RawHttp.exchange(port, data, { expect, timeoutMillis: 20_000 })))

/** The same GET in HTTP/1.1 (the plain case) and in HTTP/1.0 (the router's path). */
const both = (target: string, authorization: string) => {
  const headers: ReadonlyArray<readonly [string, string]> = [["Host", "relay.test"], ["Authorization", authorization]]
  const plain = RawHttp.format("GET", target, headers)
  return { plain, routed: Buffer.from(plain.toString("latin1").replace(" HTTP/1.1\r\n", " HTTP/1.0\r\n"), "latin1") }
}

/** An answer without what differs by connection and time (Date, Connection, Keep-Alive). */
const comparable = (answer: RawHttp.RawAnswer) => {
  const { connection: _c, date: _d, "keep-alive": _k, ...headers } = answer.headers
  return { status: answer.status, headers, body: answer.body }
}

describe("GET /perform-list before the router", () => {
  it.layer(ServerWithLogs)((it) => {
    it.effect("the plain request gets exactly the router's answer: 200 with the preview, 401 for a bad key, 400 for a limit that is no number", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        for (const [target, authorization, status] of [
          ["/perform-list", `Bearer ${key}`, 200],
          ["/perform-list?limit=1", `Bearer ${key}`, 200],
          ["/perform-list?limit=2&other=x", `bearer   ${key}`, 200],
          ["/perform-list", "Bearer crk_not-a-key", 401],
          ["/perform-list", "", 401],
          ["/perform-list?limit=99", `Bearer ${key}`, 200],
          ["/perform-list?limit=two", `Bearer ${key}`, 400],
          ["/perform-list?limit=1&limit=2", `Bearer ${key}`, 400]
        ] as const) {
          const { plain, routed } = both(target, authorization)
          const fast = (yield* exchange(plain, 1)).answers[0]!
          const slow = (yield* exchange(routed, 1)).answers[0]!
          expect([target, authorization, fast.status]).toEqual([target, authorization, status])
          expect(comparable(fast)).toEqual(comparable(slow))
        }
      }))

    it.effect("past the key's limit both paths answer 429 with Retry-After and the Error object of the contract", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        for (let i = 0; i < 60; i++) expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key) })).status).toBe(200)
        const { plain, routed } = both("/perform-list", `Bearer ${key}`)
        const fast = (yield* exchange(plain, 1)).answers[0]!
        const slow = (yield* exchange(routed, 1)).answers[0]!
        for (const answer of [fast, slow]) {
          const seconds = Number(answer.headers["retry-after"])
          expect([answer.status, seconds >= 1 && seconds <= 60]).toEqual([429, true])
          expect(JSON.parse(answer.body)).toEqual({
            error: "Rate limit exceeded: 60 requests per key per minute.",
            retryAfterSeconds: JSON.parse(answer.body).retryAfterSeconds
          })
        }
        const { "retry-after": _f, ...fastHeaders } = comparable(fast).headers
        const { "retry-after": _s, ...slowHeaders } = comparable(slow).headers
        expect(fastHeaders).toEqual(slowHeaders)
      }))

    it.effect("a connection's answers keep their order when a plain GET is followed, or preceded, by pipelined requests", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const get = both("/perform-list", `Bearer ${key}`).plain
        const bad = both("/perform-list?limit=two", `Bearer ${key}`).plain
        const missing = RawHttp.format("DELETE", "/subscribe/00000000-0000-4000-8000-000000000000", [["Host", "x"], ["Authorization", `Bearer ${key}`]])
        const cases: ReadonlyArray<readonly [ReadonlyArray<Buffer>, ReadonlyArray<number>]> = [
          [[get, get, get], [200, 200, 200]],
          [[get, missing, get], [200, 404, 200]],
          [[missing, get, bad], [404, 200, 400]],
          [[bad, get, Buffer.from("BROKEN\r\n\r\n")], [400, 200, 400]]
        ]
        for (const [requests, statuses] of cases) {
          const answers = (yield* exchange(Buffer.concat([...requests]), statuses.length)).answers
          expect(answers.map((a) => a.status)).toEqual(statuses)
        }
      }))

    it.effect("it writes the router's access line (route template, status, account id, trace ids) and counts the request in the HTTP metrics", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const series = { api: "public", method: "GET", route: "/perform-list", status: "200" }
        const count = requestsCounted(series)
        const before = yield* count
        expect((yield* exchange(both("/perform-list", `Bearer ${key}`).plain, 1)).answers[0]!.status).toBe(200)
        const mine = (line: Record<string, unknown>) => line["route"] === "/perform-list" && line["account_id"] === accountId
        yield* Eventually.eventually(Effect.map(LogCapture.ofKind(capture, "access"), (lines) => lines.some(mine)))
        const line = (yield* LogCapture.ofKind(capture, "access")).find(mine)!
        expectAccessLine(line, { api: "public", method: "GET", status: 200 }, key)
        yield* Eventually.eventually(Effect.map(count, (n) => n === before + 1))
      }))
  })
})
