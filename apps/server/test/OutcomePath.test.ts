/**
 * POST /v1/calls/{callId}/outcome is answered from the request event, before
 * the router (src/http/internal/OutcomePath.ts), when its head is plain:
 * HTTP/1.1 with a Host, the admin token, a plain call id, a JSON body of a
 * declared length within the cap, nothing unanswered before it on its
 * connection. Whichever path answers, the client sees the same answer, and
 * the access line, the metrics and the order of a connection's answers are
 * kept. An HTTP/1.0 request always takes the router's path.
 */
import { describe, expect, it } from "@effect/vitest"
import { Eventually, RawHttp } from "@crm-relay/testing"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as LogCapture from "./support/LogCapture.js"
import { accountWithKey, ADMIN_TOKEN, expectAccessLine, leadOutcome, requestsCounted, TestServerLive, urls } from "./support/TestServer.js"

const capture = LogCapture.make()
const ServerWithLogs = TestServerLive.pipe(Layer.provide(capture.layer))

const adminPort = Effect.map(urls, (u) => Number(new URL(u.admin).port))

const exchange = (data: Buffer, expect: number) =>
  Effect.flatMap(adminPort, (port) => Effect.promise(() => RawHttp.exchange(port, data, { expect, timeoutMillis: 20_000 })))

/** The same POST in HTTP/1.1 (the plain case) and in HTTP/1.0 (the router's path). */
const both = (callId: string, body: string, authorization = `Bearer ${ADMIN_TOKEN}`) => {
  const headers: ReadonlyArray<readonly [string, string]> = [
    ["Host", "relay.test"],
    ["Authorization", authorization],
    ["Content-Type", "application/json"]
  ]
  const plain = RawHttp.format("POST", `/v1/calls/${callId}/outcome`, headers, body)
  return { plain, routed: Buffer.from(plain.toString("latin1").replace(" HTTP/1.1\r\n", " HTTP/1.0\r\n"), "latin1") }
}

/** An answer without what differs by connection and time (Date, Connection, Keep-Alive). */
const comparable = (answer: RawHttp.RawAnswer) => {
  const { connection: _c, date: _d, "keep-alive": _k, ...headers } = answer.headers
  return { status: answer.status, headers, body: answer.body }
}

/** Both paths' answers to the same request, `fast` first. */
const answers = (fast: Buffer, slow: Buffer) =>
  Effect.gen(function*() {
    const a = (yield* exchange(fast, 1)).answers[0]!
    const b = (yield* exchange(slow, 1)).answers[0]!
    return { fast: comparable(a), slow: comparable(b) }
  })

describe("POST /v1/calls/{callId}/outcome before the router", () => {
  it.layer(ServerWithLogs)((it) => {
    it.effect("an outcome accepted either way gets the same 202, and the same body again is the same duplicate", () =>
      Effect.gen(function*() {
        const { accountId } = yield* accountWithKey()
        const body = JSON.stringify(leadOutcome(accountId))
        const fastId = `call-${randomUUID()}`
        const slowId = `call-${randomUUID()}`
        const first = yield* answers(both(fastId, body).plain, both(slowId, body).routed)
        expect(first.fast.status).toBe(202)
        expect({ ...first.fast, body: first.fast.body.replace(fastId, "ID") }).toEqual({ ...first.slow, body: first.slow.body.replace(slowId, "ID") })
        expect(JSON.parse(first.fast.body)).toMatchObject({ call_id: fastId, duplicate: false })
        // Each path's duplicate of the other's call: the router sees the shortcut's row, and the other way round.
        const again = yield* answers(both(slowId, body).plain, both(fastId, body).routed)
        expect(again.fast.status).toBe(202)
        expect({ ...again.fast, body: again.fast.body.replace(slowId, "ID") }).toEqual({ ...again.slow, body: again.slow.body.replace(fastId, "ID") })
        expect(JSON.parse(again.fast.body)).toMatchObject({ call_id: slowId, duplicate: true })
      }))

    it.effect("refused input, an unknown account and a different body for a known call get exactly the router's answers", () =>
      Effect.gen(function*() {
        const { accountId } = yield* accountWithKey()
        const known = `call-${randomUUID()}`
        expect((yield* exchange(both(known, JSON.stringify(leadOutcome(accountId))).plain, 1)).answers[0]!.status).toBe(202)
        const deep = `${"[".repeat(40)}${"]".repeat(40)}`
        for (const [callId, body, status] of [
          [`call-${randomUUID()}`, "{not json", 400],
          [`call-${randomUUID()}`, deep, 400],
          [`call-${randomUUID()}`, "[]", 400],
          [`call-${randomUUID()}`, JSON.stringify(leadOutcome(accountId, { classification: "Not A Word" })), 400],
          [`call-${randomUUID()}`, JSON.stringify({ ...leadOutcome(accountId), tenant_id: undefined }), 400],
          [`call-${randomUUID()}`, JSON.stringify(leadOutcome("not-a-uuid")), 400],
          [`call-${randomUUID()}`, JSON.stringify(leadOutcome(randomUUID())), 404],
          [known, JSON.stringify(leadOutcome(accountId, { classification: "spam" })), 409]
        ] as const) {
          const { plain, routed } = both(callId, body)
          const { fast, slow } = yield* answers(plain, routed)
          expect([body, fast.status]).toEqual([body, status])
          expect(fast).toEqual(slow)
        }
      }))

    it.effect("a wrong or missing admin token goes the router's way: 401 with the Error object", () =>
      Effect.gen(function*() {
        const { accountId } = yield* accountWithKey()
        for (const authorization of ["Bearer not-the-token", ""]) {
          const { plain, routed } = both(`call-${randomUUID()}`, JSON.stringify(leadOutcome(accountId)), authorization)
          const { fast, slow } = yield* answers(plain, routed)
          expect(fast.status).toBe(401)
          expect(fast).toEqual(slow)
        }
      }))

    it.effect("a connection's answers keep their order when a plain POST is followed, or preceded, by pipelined requests", () =>
      Effect.gen(function*() {
        const { accountId } = yield* accountWithKey()
        const post = () => both(`call-${randomUUID()}`, JSON.stringify(leadOutcome(accountId))).plain
        const bad = both(`call-${randomUUID()}`, "{not json").plain
        const missing = RawHttp.format("GET", `/v1/calls/call-${randomUUID()}/outcome`, [["Host", "x"], ["Authorization", `Bearer ${ADMIN_TOKEN}`]])
        const cases: ReadonlyArray<readonly [ReadonlyArray<Buffer>, ReadonlyArray<number>]> = [
          [[post(), post(), post()], [202, 202, 202]],
          [[post(), missing, post()], [202, 404, 202]],
          [[missing, post(), bad], [404, 202, 400]]
        ]
        for (const [requests, statuses] of cases) {
          const got = (yield* exchange(Buffer.concat([...requests]), statuses.length)).answers
          expect(got.map((a) => a.status)).toEqual(statuses)
        }
      }))

    it.effect("it writes the router's access line (route template, status, trace ids) and counts the request in the HTTP metrics", () =>
      Effect.gen(function*() {
        const { accountId } = yield* accountWithKey()
        const series = { api: "internal", method: "POST", route: "/v1/calls/:callId/outcome", status: "202" }
        const count = requestsCounted(series)
        const before = yield* count
        const linesBefore = (yield* LogCapture.ofKind(capture, "access")).filter((l) => l["route"] === series.route).length
        expect((yield* exchange(both(`call-${randomUUID()}`, JSON.stringify(leadOutcome(accountId))).plain, 1)).answers[0]!.status).toBe(202)
        const mine = Effect.map(LogCapture.ofKind(capture, "access"), (lines) => lines.filter((l) => l["route"] === series.route))
        yield* Eventually.eventually(Effect.map(mine, (lines) => lines.length > linesBefore))
        const line = (yield* mine).at(-1)!
        expectAccessLine(line, { api: "internal", method: "POST", status: 202 }, ADMIN_TOKEN)
        yield* Eventually.eventually(Effect.map(count, (n) => n === before + 1))
      }))
  })
})
