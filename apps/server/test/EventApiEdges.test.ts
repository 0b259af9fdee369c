/**
 * The public port at its edges: whatever bytes arrive, it answers only the
 * contract's three pairs and the contract's statuses, always with the Error
 * object. Raw sockets where a client library would tidy the request up.
 */
import { describe, expect, it } from "@effect/vitest"
import { Subscriptions } from "@crm-relay/events"
import { RawHttp } from "@crm-relay/testing"
import { Effect } from "effect"
import { accountWithKey, bearer, jsonWith, request, TestServerLive, urls } from "./support/TestServer.js"

const NOT_FOUND = { error: "Not found: the Event API serves POST /subscribe, DELETE /subscribe/{id} and GET /perform-list." }
const UNKNOWN_ID = { error: "No subscription with this id exists for this account." }
const UNAUTHORIZED = { error: "The integration key is missing, invalid or disabled." }
const CONTENT_TYPE = { error: "Content-Type must be application/json." }

const publicPort = Effect.map(urls, (u) => Number(new URL(u.public).port))

const raw = (data: string | Buffer | ReadonlyArray<string | Buffer>, options: Parameters<typeof RawHttp.exchange>[2] = {}) =>
  Effect.flatMap(publicPort, (port) => Effect.promise(() => RawHttp.exchange(port, data, options)))

const subscribe = (key: string, body: unknown) =>
  Effect.flatMap(urls, (u) => request("POST", `${u.public}/subscribe`, { headers: jsonWith(key), body: JSON.stringify(body) }))

const idOf = (answer: { readonly json: unknown }) => (answer.json as { id: string }).id

const isErrorObject = (body: string): boolean => {
  try {
    const parsed: unknown = JSON.parse(body)
    return typeof parsed === "object" && parsed !== null && typeof (parsed as { error?: unknown }).error === "string"
  } catch {
    return false
  }
}

describe("Event API edges", () => {
  it.layer(TestServerLive)((it) => {
    it.effect("\"Three method and path pairs exist ... No other public paths or methods are served\": exact method, case, slashes, no ';' parameters (404 with the Error object)", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { accountId, key } = yield* accountWithKey()
        const id = idOf(yield* subscribe(key, { targetUrl: "https://r" }))
        const valid = JSON.stringify({ targetUrl: "https://r/other" })
        const lookalikes: ReadonlyArray<readonly [string, string]> = [
          ["POST", "/SUBSCRIBE"],
          ["POST", "/Subscribe"],
          ["POST", "/subscribe/"],
          ["POST", "//subscribe"],
          ["POST", "/subscribe;x"],
          ["DELETE", `//subscribe/${id}`],
          ["DELETE", `/subscribe/${id}/`],
          ["DELETE", `/subscribe//${id}`],
          ["DELETE", `/SUBSCRIBE/${id}`],
          ["DELETE", `/subscribe/${id};x`],
          ["GET", "/Perform-List"],
          ["GET", "/perform-list;x"],
          ["GET", "/perform-list/"],
          ["GET", "//perform-list"],
          ["GET", "/perform-list;limit=3?limit=3"]
        ]
        for (const [method, path] of lookalikes) {
          const answer = yield* request(method, `${u.public}${path}`, {
            headers: jsonWith(key),
            ...(method === "POST" ? { body: valid } : {})
          })
          expect([method, path, answer.status, answer.json]).toEqual([method, path, 404, NOT_FOUND])
        }
        // HEAD is not GET: 404 (an answer to HEAD carries no body).
        const head = yield* request("HEAD", `${u.public}/perform-list`, { headers: bearer(key) })
        expect(head.status).toBe(404)
        // Nothing was created or removed by the lookalikes.
        expect((yield* (yield* Subscriptions.Subscriptions).list(accountId)).map((s) => s.id)).toEqual([id])
      }))

    it.effect("POST /subscribe: \"header Content-Type: application/json\" — multipart and other bodies are refused with 400 before they are parsed", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const multipart = "--b\r\nContent-Disposition: form-data; name=\"targetUrl\"\r\n\r\nhttps://r\r\n--b--\r\n"
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["multipart/form-data; boundary=b", multipart],
          ["multipart/form-data; boundary=b", ""],
          ["multipart/form-data", ""],
          ["text/plain", "{\"targetUrl\":\"https://r\"}"],
          ["application/octet-stream", "{\"targetUrl\":\"https://r\"}"],
          ["application/jsonx", "{\"targetUrl\":\"https://r\"}"]
        ]
        for (const [contentType, body] of cases) {
          const sent = RawHttp.format("POST", "/subscribe", [
            ["Host", "127.0.0.1"],
            ["Authorization", `Bearer ${key}`],
            ["Content-Type", contentType]
          ], body)
          const exchanged = yield* raw(sent, { expect: 1, timeoutMillis: 20_000 })
          expect([contentType, body.length, exchanged.timedOut]).toEqual([contentType, body.length, false])
          expect(exchanged.answers[0]?.status).toBe(400)
          expect(JSON.parse(exchanged.answers[0]!.body)).toEqual(CONTENT_TYPE)
        }
        // Without a valid key the key is refused first.
        const anonymous = yield* raw(
          RawHttp.format("POST", "/subscribe", [["Host", "x"], ["Content-Type", "multipart/form-data; boundary=b"]], multipart),
          { expect: 1, timeoutMillis: 20_000 }
        )
        expect(anonymous.answers.map((a) => [a.status, JSON.parse(a.body)])).toEqual([[401, UNAUTHORIZED]])
        expect(yield* (yield* Subscriptions.Subscriptions).list(accountId)).toEqual([])
        // The connection of a refused body keeps working: its body was discarded, not read as the next request.
        const kept = yield* raw([
          RawHttp.format("POST", "/subscribe", [["Host", "x"], ["Authorization", `Bearer ${key}`], ["Content-Type", "text/plain"]], "x".repeat(40_000)),
          RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`]])
        ], { expect: 2, timeoutMillis: 20_000 })
        expect(kept.answers.map((a) => a.status)).toEqual([400, 200])
      }))

    it.effect("Errors 400: a NUL character, an unpaired surrogate or an event too long to index in targetUrl or event is the client's error (400), never 502", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const cases: ReadonlyArray<readonly [unknown, string]> = [
          [{ targetUrl: "https://r/\u0000" }, "targetUrl must not contain a NUL character or an unpaired surrogate."],
          [{ targetUrl: "https://r/", event: "lead\u0000" }, "event must not contain a NUL character or an unpaired surrogate."],
          [{ targetUrl: "https://r/\ud800" }, "targetUrl must not contain a NUL character or an unpaired surrogate."],
          [{ targetUrl: "https://r/", event: "\udc00lead" }, "event must not contain a NUL character or an unpaired surrogate."],
          [{ targetUrl: "https://r/", event: "e".repeat(3000) }, "event must be at most 1024 bytes."]
        ]
        for (const [body, error] of cases) {
          const answer = yield* subscribe(key, body)
          expect([answer.status, answer.json]).toEqual([400, { error }])
        }
        // Characters that are storable stay accepted as given.
        const emoji = yield* subscribe(key, { targetUrl: "https://r/\u{1F600}\u0001", event: "e".repeat(1024) })
        expect(emoji.status).toBe(201)
        expect((yield* (yield* Subscriptions.Subscriptions).list(accountId)).map((s) => s.targetUrl)).toEqual(["https://r/\u{1F600}\u0001"])
      }))

    it.effect("Errors 400: JSON nested thousands of levels deep is 400 (the depth is bounded), huge arrays and wide objects are answered, and an oversize chunked body is 413", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        const post = (body: string) => request("POST", `${u.public}/subscribe`, { headers: jsonWith(key), body })
        const deep = (n: number) => "[".repeat(n) + "]".repeat(n)
        const tooDeep = { error: "The request body is nested deeper than 32 levels." }
        for (const body of [deep(5000), `{"targetUrl":${deep(10_000)}}`, `{"targetUrl":"https://r","x":${"{\"a\":".repeat(3000)}1${"}".repeat(3000)}}`, deep(20_000).slice(0, 30_000)]) {
          const answer = yield* post(body)
          expect([body.slice(0, 20), answer.status, answer.json]).toEqual([body.slice(0, 20), 400, tooDeep])
        }
        // Brackets inside strings are not nesting.
        expect((yield* post(JSON.stringify({ targetUrl: `https://r/${"[".repeat(1000)}` }))).status).toBe(201)
        const wide = yield* post(JSON.stringify(Object.fromEntries([["targetUrl", "https://r"], ...Array.from({ length: 5000 }, (_, i) => [`k${i}`, i])])))
        expect(wide.status).toBe(201)
        const longArray = yield* post(JSON.stringify(Array.from({ length: 20_000 }, () => 1)))
        expect([longArray.status, longArray.json]).toEqual([400, { error: "The request body must be a JSON object." }])
        const arrayField = yield* post(JSON.stringify({ targetUrl: Array.from({ length: 10_000 }, () => [1]) }))
        expect([arrayField.status, arrayField.json]).toEqual([400, { error: "targetUrl must be a string." }])
        // A chunked body over the cap is answered 413 (not cut off with the connection), and the connection closed.
        const big = Buffer.from(JSON.stringify(Array.from({ length: 20_000 }, (_, i) => i)))
        const chunked = Buffer.concat([Buffer.from(`${big.length.toString(16)}\r\n`), big, Buffer.from("\r\n0\r\n\r\n")])
        const exchanged = yield* raw([
          RawHttp.format("POST", "/subscribe", [["Host", "x"], ["Authorization", `Bearer ${key}`], ["Content-Type", "application/json"], ["Transfer-Encoding", "chunked"]], chunked),
          RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`]])
        ], { expect: 2, timeoutMillis: 20_000 })
        expect(exchanged.answers.map((a) => [a.status, a.headers["connection"], JSON.parse(a.body)])).toEqual([
          [413, "close", { error: "The request body is larger than 65536 bytes, the most this server accepts; send a body of at most 65536 bytes." }]
        ])
        expect([exchanged.closed, exchanged.timedOut]).toEqual([true, false])
      }))

    it.effect("DELETE /subscribe/{id}: an id over 100 characters is authenticated first (401), then 404 for an unknown id", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        for (const id of ["a".repeat(101), "0f8fad5b-d9cb-469f-a165-70867728950e".repeat(5), "x".repeat(8000), "%00".repeat(200)]) {
          const anonymous = yield* request("DELETE", `${u.public}/subscribe/${id}`, {})
          expect([id.length, anonymous.status, anonymous.json]).toEqual([id.length, 401, UNAUTHORIZED])
          const keyed = yield* request("DELETE", `${u.public}/subscribe/${id}`, { headers: bearer(key) })
          expect([id.length, keyed.status, keyed.json]).toEqual([id.length, 404, UNKNOWN_ID])
        }
      }))

    it.effect("Errors: malformed HTTP (bare LF, control bytes, missing Host, Content-Length with Transfer-Encoding, an oversize head) is 400 with the Error object, and the server answers normally afterwards", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const malformed: ReadonlyArray<readonly [string, string]> = [
          ["bare LF", `GET /perform-list HTTP/1.1\nHost: x\nAuthorization: Bearer ${key}\n\n`],
          ["control byte in a header", `GET /perform-list HTTP/1.1\r\nHost: x\r\nX-Test: a\u0001b\r\n\r\n`],
          ["missing Host", `GET /perform-list HTTP/1.1\r\nAuthorization: Bearer ${key}\r\n\r\n`],
          [
            "Content-Length and Transfer-Encoding",
            `POST /subscribe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`
          ],
          ["head over the limit", `GET /perform-list HTTP/1.1\r\nHost: x\r\nX-Pad: ${"p".repeat(20_000)}\r\n\r\n`],
          ["invalid method", "G(T /perform-list HTTP/1.1\r\nHost: x\r\n\r\n"],
          ["not HTTP", "\u0000\u0001\u0002 hello\r\n\r\n"],
          ["bad version", "GET /perform-list HTTP/7.5\r\nHost: x\r\n\r\n"],
          ["space in the target", "GET /perform list HTTP/1.1\r\nHost: x\r\n\r\n"]
        ]
        for (const [name, bytes] of malformed) {
          const exchanged = yield* raw(bytes, { expect: 1, timeoutMillis: 20_000 })
          const answer = exchanged.answers[0]
          expect([name, exchanged.timedOut, answer?.status]).toEqual([name, false, 400])
          expect([name, answer?.headers["content-type"]]).toEqual([name, "application/json"])
          expect([name, isErrorObject(answer!.body)]).toEqual([name, true])
        }
        // CONNECT is not one of the pairs: 404 with the Error object, not a dropped connection.
        const connect = yield* raw("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", { expect: 1, timeoutMillis: 20_000 })
        expect(connect.answers.map((a) => [a.status, JSON.parse(a.body)])).toEqual([[404, NOT_FOUND]])
        // An expectation the server does not know is not a bare 417: the request is served.
        const expecting = yield* raw(
          RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`], ["Expect", "the-unexpected"]]),
          { expect: 1, timeoutMillis: 20_000 }
        )
        expect(expecting.answers.map((a) => a.status)).toEqual([200])
        const after = yield* raw(RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`]]), { expect: 1 })
        expect(after.answers.map((a) => a.status)).toEqual([200])
      }))

    it.effect("Subscription lifecycle: two pipelined DELETEs of one subscription on one connection are handled in order — 204, then 404", () =>
      Effect.gen(function*() {
        for (let round = 0; round < 25; round++) {
          // A key per round: 25 rounds of three requests stay under the per-key limit.
          const { key } = yield* accountWithKey()
          const id = idOf(yield* subscribe(key, { targetUrl: `https://r/${round}` }))
          const del = RawHttp.format("DELETE", `/subscribe/${id}`, [["Host", "x"], ["Authorization", `Bearer ${key}`]])
          const exchanged = yield* raw(Buffer.concat([del, del]), { expect: 2, timeoutMillis: 20_000 })
          expect([round, exchanged.answers.map((a) => a.status)]).toEqual([round, [204, 404]])
        }
        // A malformed request after well-formed ones is answered after them, in order.
        const { key } = yield* accountWithKey()
        const id = idOf(yield* subscribe(key, { targetUrl: "https://r/last" }))
        const mixed = yield* raw(
          [
            Buffer.concat([
              RawHttp.format("DELETE", `/subscribe/${id}`, [["Host", "x"], ["Authorization", `Bearer ${key}`]]),
              RawHttp.format("GET", "/perform-list", [["Host", "x"], ["Authorization", `Bearer ${key}`]]),
              Buffer.from("BROKEN\r\n\r\n")
            ])
          ],
          { expect: 3, timeoutMillis: 20_000 }
        )
        expect(mixed.answers.map((a) => a.status)).toEqual([204, 200, 400])
      }))
  })
})
