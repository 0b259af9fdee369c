import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Events } from "@crm-relay/contract"
import { IntegrationKeys, Subscriptions } from "@crm-relay/events"
import { Effect, Redacted, Schema, TestClock } from "effect"
import { accountWithKey, bearer, jsonWith, request, TestServerLive, urls } from "./support/TestServer.js"

const isUuid = Schema.is(Schema.UUID)

const subscribe = (key: string, body: unknown) =>
  Effect.flatMap(urls, (u) => request("POST", `${u.public}/subscribe`, { headers: jsonWith(key), body: JSON.stringify(body) }))

const performList = (key: string, query = "") =>
  Effect.flatMap(urls, (u) => request("GET", `${u.public}/perform-list${query}`, { headers: bearer(key) }))

const idOf = (answer: { readonly json: unknown }) => (answer.json as { id: string }).id

const ENDPOINTS = [
  ["POST", "/subscribe"],
  ["DELETE", "/subscribe/0f8fad5b-d9cb-469f-a165-70867728950e"],
  ["GET", "/perform-list"]
] as const

describe("Event API over HTTP", () => {
  it.layer(TestServerLive)((it) => {
    // --- POST /subscribe ----------------------------------------------------

    it.effect("POST /subscribe: 201 Created with a JSON body {id} holding a UUID", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const answer = yield* subscribe(key, { targetUrl: "https://hooks.example.com/lead", event: "lead" })
        expect(answer.status).toBe(201)
        expect(answer.headers.get("content-type")).toContain("application/json")
        expect(Object.keys(answer.json as object)).toEqual(["id"])
        expect(isUuid(idOf(answer))).toBe(true)
      }))

    it.effect("Subscription lifecycle: not idempotent — the same subscribe twice gives two ids (duplicate pushes)", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const body = { targetUrl: "https://hooks.example.com/same" }
        const first = yield* subscribe(key, body)
        const second = yield* subscribe(key, body)
        expect([first.status, second.status]).toEqual([201, 201])
        expect(idOf(first)).not.toBe(idOf(second))
        const stored = yield* (yield* Subscriptions.Subscriptions).list(accountId)
        expect(stored.map((s) => s.id)).toEqual([idOf(first), idOf(second)])
      }))

    it.effect("Subscription: event is optional (lead by default); unknown event strings are accepted and match no fan-out", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        expect((yield* subscribe(key, { targetUrl: "https://r/1" })).status).toBe(201)
        expect((yield* subscribe(key, { targetUrl: "https://r/2", event: "everything" })).status).toBe(201)
        const subscriptions = yield* Subscriptions.Subscriptions
        expect((yield* subscriptions.list(accountId)).map((s) => s.event)).toEqual(["lead", "everything"])
        expect(yield* subscriptions.matching(accountId, "booking")).toEqual([])
      }))

    it.effect("POST /subscribe: a target that is not public HTTPS is accepted and stored as given (reachability not tested)", () =>
      Effect.gen(function*() {
        const { accountId, key } = yield* accountWithKey()
        const targetUrl = "http://127.0.0.1:1/never reached"
        expect((yield* subscribe(key, { targetUrl })).status).toBe(201)
        expect((yield* (yield* Subscriptions.Subscriptions).list(accountId))[0]!.targetUrl).toBe(targetUrl)
      }))

    // --- 400 -----------------------------------------------------------------

    it.effect("Errors 400: targetUrl missing, or not a string, or a body that is not a JSON object", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const cases: ReadonlyArray<readonly [unknown, string]> = [
          [{}, "targetUrl is required."],
          [{ event: "lead" }, "targetUrl is required."],
          [{ targetUrl: 5 }, "targetUrl must be a string."],
          [{ targetUrl: null }, "targetUrl must be a string."],
          [{ targetUrl: "https://r", event: 7 }, "event must be a string."],
          [["https://r"], "The request body must be a JSON object."],
          [null, "The request body must be a JSON object."]
        ]
        for (const [body, error] of cases) {
          const answer = yield* subscribe(key, body)
          expect(answer.status).toBe(400)
          expect(answer.json).toEqual({ error })
        }
      }))

    it.effect("Errors 400: malformed JSON, a wrong or missing Content-Type; an oversize body is 413", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { accountId, key } = yield* accountWithKey()
        const post = (headers: Record<string, string>, body: string | Uint8Array) =>
          request("POST", `${u.public}/subscribe`, { headers: { ...bearer(key), ...headers }, body })
        const valid = JSON.stringify({ targetUrl: "https://r" })
        const cases: ReadonlyArray<readonly [Record<string, string>, string | Uint8Array, string]> = [
          [{ "content-type": "application/json" }, "{\"targetUrl\":", "The request body is not valid JSON."],
          [{ "content-type": "application/json" }, "", "The request body must be a JSON object."],
          [{ "content-type": "text/plain" }, valid, "Content-Type must be application/json."],
          [{ "content-type": "application/x-www-form-urlencoded" }, "targetUrl=https%3A%2F%2Fr", "Content-Type must be application/json."],
          [{}, new TextEncoder().encode(valid), "Content-Type must be application/json."]
        ]
        for (const [headers, body, error] of cases) {
          const answer = yield* post(headers, body)
          expect(answer.status).toBe(400)
          expect(answer.json).toEqual({ error })
        }
        // Over the cap is HTTP's 413 (RFC 9110 §15.5.14), with the Error object naming the limit.
        const oversize = yield* post({ "content-type": "application/json" }, JSON.stringify({ targetUrl: "https://r", pad: "x".repeat(70 * 1024) }))
        expect([oversize.status, oversize.json]).toEqual([413, {
          error: "The request body is larger than 65536 bytes, the most this server accepts; send a body of at most 65536 bytes."
        }])
        // `application/json; charset=utf-8` is JSON.
        expect((yield* post({ "content-type": "application/json; charset=utf-8" }, valid)).status).toBe(201)
        expect(yield* (yield* Subscriptions.Subscriptions).list(accountId)).toHaveLength(1)
      }))

    // --- DELETE /subscribe/{id} ---------------------------------------------

    it.effect("DELETE /subscribe/{id}: 204 No Content with no body for an id owned by the authenticated account", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { accountId, key } = yield* accountWithKey()
        const id = idOf(yield* subscribe(key, { targetUrl: "https://r" }))
        const answer = yield* request("DELETE", `${u.public}/subscribe/${id}`, { headers: bearer(key) })
        expect(answer.status).toBe(204)
        expect(answer.text).toBe("")
        expect(answer.headers.get("content-type")).toBeNull()
        expect(yield* (yield* Subscriptions.Subscriptions).list(accountId)).toEqual([])
      }))

    it.effect("DELETE /subscribe/{id}: an already removed, unknown or malformed id gives 404 with the Error object", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        const id = idOf(yield* subscribe(key, { targetUrl: "https://r" }))
        yield* request("DELETE", `${u.public}/subscribe/${id}`, { headers: bearer(key) })
        for (const target of [id, "0f8fad5b-d9cb-469f-a165-70867728950e", "not-a-uuid"]) {
          const answer = yield* request("DELETE", `${u.public}/subscribe/${target}`, { headers: bearer(key) })
          expect(answer.status).toBe(404)
          expect(answer.json).toEqual({ error: "No subscription with this id exists for this account." })
        }
      }))

    it.effect("DELETE /subscribe/{id}: another account's id gives 404 and leaves that subscription in place", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const owner = yield* accountWithKey()
        const stranger = yield* accountWithKey()
        const id = idOf(yield* subscribe(owner.key, { targetUrl: "https://r" }))
        const answer = yield* request("DELETE", `${u.public}/subscribe/${id}`, { headers: bearer(stranger.key) })
        expect(answer.status).toBe(404)
        expect(answer.json).toEqual({ error: "No subscription with this id exists for this account." })
        expect((yield* (yield* Subscriptions.Subscriptions).list(owner.accountId)).map((s) => s.id)).toEqual([id])
      }))

    // --- Authentication ------------------------------------------------------

    it.effect("Authentication rule 2: a missing, unknown or malformed key gives 401 with the Error object on all three endpoints", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        const authorizations: ReadonlyArray<Record<string, string>> = [
          {},
          { authorization: "Bearer crk_unknown" },
          { authorization: `Basic ${key}` },
          { authorization: `Bearer ${key}x` },
          { authorization: "Bearer" }
        ]
        for (const headers of authorizations) {
          for (const [method, path] of ENDPOINTS) {
            const answer = yield* request(method, `${u.public}${path}`, {
              headers: { ...headers, "content-type": "application/json" },
              ...(method === "POST" ? { body: JSON.stringify({ targetUrl: "https://r" }) } : {})
            })
            expect(answer.status).toBe(401)
            expect(answer.headers.get("www-authenticate")).toBe("Bearer")
            expect(answer.json).toEqual({ error: "The integration key is missing, invalid or disabled." })
          }
        }
        // The scheme is case-insensitive.
        expect((yield* request("GET", `${u.public}/perform-list`, { headers: { authorization: `bearer ${key}` } })).status)
          .toBe(200)
      }))

    it.effect("Authentication rule 3: any active key of the same account may manage that account's subscriptions", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const first = yield* accountWithKey()
        const second = yield* (yield* IntegrationKeys.IntegrationKeys).create(first.accountId)
        const id = idOf(yield* subscribe(first.key, { targetUrl: "https://r" }))
        const answer = yield* request("DELETE", `${u.public}/subscribe/${id}`, {
          headers: bearer(Redacted.value(second.key))
        })
        expect(answer.status).toBe(204)
      }))

    it.effect("Subscription lifecycle: a key turned off gets 401, and the account's earlier subscriptions are not removed", () =>
      Effect.gen(function*() {
        const { accountId, key, keyId } = yield* accountWithKey()
        const id = idOf(yield* subscribe(key, { targetUrl: "https://r", event: "all" }))
        yield* (yield* IntegrationKeys.IntegrationKeys).disable(keyId)
        expect((yield* performList(key)).status).toBe(401)
        expect((yield* subscribe(key, { targetUrl: "https://r" })).status).toBe(401)
        expect((yield* (yield* Subscriptions.Subscriptions).matching(accountId, "lead")).map((s) => s.id)).toEqual([id])
      }))

    // --- 404 for everything else --------------------------------------------

    it.effect("Errors 404: every other path or method is 404 with the Error object, with or without a key", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const { key } = yield* accountWithKey()
        const others = [
          ["GET", "/"],
          ["GET", "/subscribe"],
          ["PUT", "/subscribe"],
          ["POST", "/subscribe/0f8fad5b-d9cb-469f-a165-70867728950e"],
          ["GET", "/subscribe/0f8fad5b-d9cb-469f-a165-70867728950e"],
          ["PATCH", "/subscribe/0f8fad5b-d9cb-469f-a165-70867728950e"],
          ["POST", "/perform-list"],
          ["DELETE", "/perform-list"],
          ["OPTIONS", "/perform-list"],
          ["GET", "/perform-list/extra"],
          ["GET", "/v1/accounts"],
          ["GET", "/healthz"],
          ["DELETE", "/subscribe"]
        ] as const
        for (const headers of [{}, bearer(key)]) {
          for (const [method, path] of others) {
            const answer = yield* request(method, `${u.public}${path}`, { headers })
            expect([method, path, answer.status]).toEqual([method, path, 404])
            expect(answer.json).toEqual({
              error: "Not found: the Event API serves POST /subscribe, DELETE /subscribe/{id} and GET /perform-list."
            })
          }
        }
      }))

    // --- GET /perform-list ---------------------------------------------------

    it.effect("Preview: an account with no deliveries gets 200 with the synthetic example record", () =>
      Effect.gen(function*() {
        const { key } = yield* accountWithKey()
        const answer = yield* performList(key)
        expect(answer.status).toBe(200)
        expect(answer.json).toEqual([Events.SAMPLE_PREVIEW])
      }))

    it.effect("Limits: limit is parsed and clamped to 1..20 (default 3); other query parameters are not read", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { accountId, key } = yield* accountWithKey()
        for (let i = 0; i < 25; i++) {
          yield* sql`INSERT INTO deliveries (account_id, event, call_id, payload, created_at)
            VALUES (${accountId}, 'lead', ${`call-${i}`}, ${{}}, ${new Date(Date.UTC(2030, 0, 1, 0, 0, i))})`
        }
        const count = (query: string) => Effect.map(performList(key, query), (a) => [a.status, (a.json as Array<unknown>).length])
        expect(yield* count("")).toEqual([200, 3])
        expect(yield* count("?limit=1")).toEqual([200, 1])
        expect(yield* count("?limit=0")).toEqual([200, 1])
        expect(yield* count("?limit=-7")).toEqual([200, 1])
        expect(yield* count("?limit=7")).toEqual([200, 7])
        expect(yield* count("?limit=20")).toEqual([200, 20])
        expect(yield* count("?limit=100")).toEqual([200, 20])
        expect(yield* count("?limit=%205%20")).toEqual([200, 5])
        expect(yield* count("?limit=2&offset=10&since=yesterday")).toEqual([200, 2])
        for (const bad of ["?limit=abc", "?limit=2.5", "?limit="]) {
          const answer = yield* performList(key, bad)
          expect([bad, answer.status]).toEqual([bad, 400])
          expect(answer.json).toEqual({ error: "limit must be an integer from 1 to 20." })
        }
        const repeated = yield* performList(key, "?limit=1&limit=2")
        expect([repeated.status, repeated.json]).toEqual([400, { error: "limit must be given once." }])
      }))

    it.effect("Preview record: latest deliveries, contact holds only external_id, job_type and summary empty, booked = has an external appointment id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { accountId, key } = yield* accountWithKey()
        const payload = { contact: { full_name: "Jane Doe", phones: ["+15550100"] }, job_type: "Plumbing", summary: "Leak" }
        const [lead] = yield* sql<{ id: string }>`INSERT INTO deliveries
          (account_id, event, call_id, source, contact_external_id, payload, created_at)
          VALUES (${accountId}, 'lead', 'call-1', 'Receptionist (phone)', 'crm-contact-1', ${payload}, ${new Date(Date.UTC(2030, 0, 1))})
          RETURNING id`
        const [booking] = yield* sql<{ id: string }>`INSERT INTO deliveries
          (account_id, event, call_id, source, contact_external_id, appointment_external_id, payload, created_at)
          VALUES (${accountId}, 'booking', 'call-2', 'Receptionist (phone)', 'crm-contact-2', 'apt-7', ${payload}, ${new Date(Date.UTC(2030, 0, 2))})
          RETURNING id`
        const answer = yield* performList(key)
        expect(answer.status).toBe(200)
        expect(answer.json).toEqual([
          { id: booking!.id, call_id: "call-2", source: "Receptionist (phone)", contact: { external_id: "crm-contact-2" }, job_type: "", summary: "", booked: true },
          { id: lead!.id, call_id: "call-1", source: "Receptionist (phone)", contact: { external_id: "crm-contact-1" }, job_type: "", summary: "", booked: false }
        ])
        expect(answer.text).not.toContain("Jane")
        expect(answer.text).not.toContain("+1555")
      }))

    // --- 429 -----------------------------------------------------------------

    it.effect("Limits: 60 requests per key per minute; the 61st gets 429 with Retry-After seconds and retryAfterSeconds", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2031-05-01T12:00:10Z"))
        const { key } = yield* accountWithKey()
        const other = yield* accountWithKey()
        for (let i = 0; i < 59; i++) expect((yield* performList(key)).status).toBe(200)
        // Every endpoint counts against the same per-key budget.
        expect((yield* subscribe(key, { targetUrl: "https://r" })).status).toBe(201)
        const answer = yield* performList(key)
        expect(answer.status).toBe(429)
        expect(answer.headers.get("retry-after")).toBe("50")
        expect(answer.json).toEqual({ error: "Rate limit exceeded: 60 requests per key per minute.", retryAfterSeconds: 50 })
        expect((yield* subscribe(key, { targetUrl: "https://r" })).status).toBe(429)
        // Another key has its own budget.
        expect((yield* performList(other.key)).status).toBe(200)
        // The next minute starts afresh.
        yield* TestClock.adjust("50 seconds")
        expect((yield* performList(key)).status).toBe(200)
      }))

    it.effect("Limits: counting is exact under concurrency — 200 concurrent requests on one key: exactly 60 pass, 140 get 429", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2031-05-02T12:00:00Z"))
        const { key } = yield* accountWithKey()
        const answers = yield* Effect.all(Array.from({ length: 200 }, () => performList(key)), { concurrency: "unbounded" })
        const statuses = answers.map((a) => a.status)
        expect(statuses.filter((s) => s === 200)).toHaveLength(60)
        expect(statuses.filter((s) => s === 429)).toHaveLength(140)
      }))
  })
})
