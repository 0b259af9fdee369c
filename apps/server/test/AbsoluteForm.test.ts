/**
 * The absolute-form request target (`POST http://host/subscribe`), which a
 * client behind a forward proxy sends: RFC 9112 §3.2.2 "a server MUST accept
 * the absolute-form in requests". The public port serves it as its
 * origin-form, exactly: the three pairs and their near misses answer as
 * their origin-forms do, and the access line and metrics name the route.
 */
import { describe, expect, it } from "@effect/vitest"
import { Subscriptions } from "@crm-relay/events"
import { Eventually, RawHttp } from "@crm-relay/testing"
import { Effect, Layer } from "effect"
import * as RequestTarget from "../src/http/RequestTarget.js"
import * as LogCapture from "./support/LogCapture.js"
import { accountWithKey, expectAccessLine, requestsCounted, TestServerLive, urls } from "./support/TestServer.js"

const capture = LogCapture.make()
const ServerWithLogs = TestServerLive.pipe(Layer.provide(capture.layer))

const NO_HOST = { error: "The request has no Host header." }

/** One request on its own connection, its answer. */
const send = (method: string, target: string, headers: ReadonlyArray<readonly [string, string]>, body?: string) =>
  Effect.flatMap(urls, (u) =>
    Effect.promise(() =>
      RawHttp.exchange(Number(new URL(u.public).port), RawHttp.format(method, target, headers, body), {
        expect: 1,
        timeoutMillis: 20_000,
        noBody: [method === "HEAD"]
      })
    )).pipe(Effect.map((exchange) => {
      const answer = exchange.answers[0]!
      return { status: answer.status, body: answer.body === "" ? undefined : JSON.parse(answer.body) as unknown }
    }))

const withKey = (key: string, host = "relay.test"): ReadonlyArray<readonly [string, string]> => [
  ["Host", host],
  ["Authorization", `Bearer ${key}`],
  ["Content-Type", "application/json"]
]

describe("absolute-form request targets", () => {
  it.layer(ServerWithLogs)((it) => {
    it.effect("RFC 9112 §3.2.2 \"a server MUST accept the absolute-form in requests\": each of the three pairs answers as its origin-form", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const hook = JSON.stringify({ targetUrl: "https://hooks.example.com/lead" })
        const viaProxy = yield* send("POST", "http://relay.test/subscribe", withKey(key), hook)
        const direct = yield* send("POST", "/subscribe", withKey(key), hook)
        expect([viaProxy.status, direct.status]).toEqual([201, 201])
        const ids = [viaProxy, direct].map((a) => (a.body as { id: string }).id)
        expect((yield* (yield* Subscriptions.Subscriptions).list(accountId)).map((s) => s.id).sort()).toEqual([...ids].sort())

        // The scheme is case-insensitive; https and a port are the target's authority too; the query is kept.
        const lists = yield* Effect.all([
          send("GET", "/perform-list?limit=1", withKey(key)),
          send("GET", "http://relay.test/perform-list?limit=1", withKey(key)),
          send("GET", "HTTPS://Relay.Test:8443/perform-list?limit=1", withKey(key))
        ])
        expect(lists.map((a) => a.status)).toEqual([200, 200, 200])
        expect(lists[1]).toEqual(lists[0])
        expect(lists[2]).toEqual(lists[0])

        expect(yield* send("DELETE", `http://relay.test/subscribe/${ids[0]}`, withKey(key))).toEqual({ status: 204, body: undefined })
        expect(yield* send("DELETE", `/subscribe/${ids[1]}`, withKey(key))).toEqual({ status: 204, body: undefined })
        expect(yield* (yield* Subscriptions.Subscriptions).list(accountId)).toEqual([])
        // Without a key, the absolute-form is refused as the origin-form is.
        expect(yield* send("GET", "http://relay.test/perform-list", [["Host", "relay.test"]])).toEqual(
          yield* send("GET", "/perform-list", [["Host", "relay.test"]])
        )
      }))

    it.effect("RFC 9112 §3.2.2: the near misses of the pairs stay near misses — each absolute-form answers exactly as its origin-form", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const hook = JSON.stringify({ targetUrl: "https://hooks.example.com/lead" })
        const id = ((yield* send("POST", "/subscribe", withKey(key), hook)).body as { id: string }).id
        const nearMisses: ReadonlyArray<readonly [string, string]> = [
          ["POST", "/subscribe/"],
          ["POST", "//subscribe"],
          ["POST", "/SUBSCRIBE"],
          ["POST", "/subscribe;x"],
          ["POST", "/%73ubscribe"],
          ["POST", "/a/../subscribe"],
          ["DELETE", `/subscribe/${id}/`],
          ["DELETE", `//subscribe/${id}`],
          ["DELETE", `/subscribe//${id}`],
          ["GET", "/perform-list/"],
          ["GET", "/perform-list;x"],
          ["GET", "/subscribe/../perform-list"],
          ["GET", "/"],
          ["PUT", "/subscribe"],
          ["HEAD", "/perform-list"]
        ]
        for (const [method, path] of nearMisses) {
          const direct = yield* send(method, path, withKey(key), method === "POST" ? hook : undefined)
          const viaProxy = yield* send(method, `http://relay.test${path}`, withKey(key), method === "POST" ? hook : undefined)
          expect([method, path, viaProxy]).toEqual([method, path, direct])
          expect(direct.status).toBe(404)
        }
        // An empty path is "/" (RFC 9112 §3.2.1), with or without a query.
        const root = yield* send("GET", "/", withKey(key))
        expect(yield* send("GET", "http://relay.test", withKey(key))).toEqual(root)
        expect(yield* send("GET", "http://relay.test?limit=3", withKey(key))).toEqual(root)
        // Nothing was created or removed by them.
        expect((yield* (yield* Subscriptions.Subscriptions).list(accountId)).map((s) => s.id)).toEqual([id])
      }))

    it.effect("RFC 9112 §3.2.2 \"MUST ignore the received Host header field\": a Host that differs from the target's authority changes nothing; a missing Host is still 400 (§3.2)", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const expected = yield* send("GET", "/perform-list", withKey(key))
        expect(yield* send("GET", "http://relay.test/perform-list", withKey(key, "elsewhere.example:81"))).toEqual(expected)
        const noHost: ReadonlyArray<readonly [string, string]> = [["Authorization", `Bearer ${key}`]]
        expect(yield* send("GET", "http://relay.test/perform-list", noHost)).toEqual({ status: 400, body: NO_HOST })
      }))

    it.effect("RFC 9112 §3.2.2 / RFC 9110 §4.2: a target that is not http(s), or whose authority is empty or carries userinfo, is 400 with the Error object", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const hook = JSON.stringify({ targetUrl: "https://hooks.example.com/lead" })
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["ftp://relay.test/subscribe", RequestTarget.errors.scheme],
          ["ws://relay.test/subscribe", RequestTarget.errors.scheme],
          ["http:///subscribe", RequestTarget.errors.authority],
          ["http://user:pw@relay.test/subscribe", RequestTarget.errors.authority],
          ["http://relay.test:8x/subscribe", RequestTarget.errors.authority],
          ["http://rel ay.test/subscribe".replace(" ", "%zz"), RequestTarget.errors.authority]
        ]
        for (const [target, error] of cases) {
          expect([target, yield* send("POST", target, withKey(key), hook)]).toEqual([target, { status: 400, body: { error } }])
        }
        expect(yield* (yield* Subscriptions.Subscriptions).list(accountId)).toEqual([])
      }))

    it.effect("RFC 9112 §3.2.2: the access line and the HTTP metrics name the origin-form's route, on the router's path and on GET /perform-list's", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const hook = JSON.stringify({ targetUrl: "https://hooks.example.com/lead" })
        const subscribed = requestsCounted({ api: "public", method: "POST", route: "/subscribe", status: "201" })
        const listed = requestsCounted({ api: "public", method: "GET", route: "/perform-list", status: "200" })
        const [subscribedBefore, listedBefore] = [yield* subscribed, yield* listed]
        expect((yield* send("POST", "http://relay.test/subscribe", withKey(key), hook)).status).toBe(201)
        expect((yield* send("GET", "http://relay.test/perform-list", withKey(key))).status).toBe(200)
        for (const [method, route, status] of [["POST", "/subscribe", 201], ["GET", "/perform-list", 200]] as const) {
          const mine = (line: Record<string, unknown>) => line["route"] === route && line["account_id"] === accountId
          yield* Eventually.eventually(Effect.map(LogCapture.ofKind(capture, "access"), (lines) => lines.some(mine)))
          expectAccessLine((yield* LogCapture.ofKind(capture, "access")).find(mine)!, { api: "public", method, status }, key)
        }
        yield* Eventually.eventually(Effect.map(subscribed, (n) => n === subscribedBefore + 1))
        yield* Eventually.eventually(Effect.map(listed, (n) => n === listedBefore + 1))
      }))
  })
})
