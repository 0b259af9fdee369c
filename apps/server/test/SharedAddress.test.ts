/**
 * Accounts behind one client address (an automation platform's shared
 * egress): one account's failing key must not lock the others out. A valid
 * key is never refused because of its address; keys that are not valid —
 * revoked, forged (the right shape, a wrong tag) or malformed — get the
 * contract's 401, then the address's 429, and cost no database query.
 */
import { expect, layer } from "@effect/vitest"
import * as Statement from "@effect/sql/Statement"
import { MinuteWindow } from "@crm-relay/testing"
import { TestDatabase } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { defaultEdge } from "../src/http/Server.js"
import { adminRequest, bearer, jsonWith, layerServer, request, start } from "./support/TestServer.js"

const UNAUTHORIZED = { error: "The integration key is missing, invalid or disabled." }
const TOO_MANY = "Rate limit exceeded: more than 5 requests with an invalid key from this address in a minute; wait Retry-After seconds."
/** Long enough that a held answer cannot pass for a prompt one. */
const HOLD_MS = 8_000

/** A server whose failed-key limit is 5 a minute, holding refusals HOLD_MS, and the statements its requests sent about keys. */
const server = Effect.gen(function*() {
  let statements = 0
  // The server's request fibers inherit the transformer of the fiber that builds it. Only the key's statements
  // are counted (the lookup and the failure count), not the workers' polling.
  const started = yield* start(layerServer({ edge: { ...defaultEdge, failedKeyLimit: 5, failedKeyHoldMs: HOLD_MS } })).pipe(
    Statement.withTransformer((statement) =>
      Effect.sync(() => {
        const [text] = statement.compile()
        if (/integration_key|rate_limit/.test(text)) statements++
        return statement
      })
    )
  )
  return { ...started, keyStatements: () => statements }
})

/** A new account and one key of it, through the internal API. */
const newKey = (admin: string, name: string) =>
  Effect.gen(function*() {
    const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name })).json as { id: string }
    return (yield* adminRequest(admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { id: string; key: string }
  })

/** A key of the form issued before keys carried a tag, for a new account: stored as such keys were. */
const legacyKey = (admin: string, name: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name })).json as { id: string }
    const key = `crk_${randomBytes(32).toString("base64url")}`
    yield* Effect.orDie(sql`INSERT INTO integration_keys (account_id, secret_hash, last_four)
      VALUES (${account.id}, ${createHash("sha256").update(key).digest()}, ${key.slice(-4)})`)
    return key
  })

/** The request and how long its answer took. */
const timed = <A>(effect: Effect.Effect<A>) =>
  Effect.map(Effect.all([Effect.sync(() => performance.now()), effect, Effect.sync(() => performance.now())]), ([from, answer, to]) => ({
    answer,
    ms: to - from
  }))

const performList = (base: string, key: string) => request("GET", `${base}/perform-list`, { headers: bearer(key) })

/** The counts of earlier tests on this database start over. */
const resetCounts = Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.orDie(sql`DELETE FROM rate_limits`))

layer(TestDatabase.layer, { excludeTestServices: true })("accounts sharing a client address", (it) => {
  it.scoped("\"Request rate: 60 requests per key per minute\", not per address: after A's revoked key passed the failed-key limit, B's valid key subscribes, lists and unsubscribes at once with the contract's answers; A stays refused without a query", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* MinuteWindow.withinOne()
      const { admin, keyStatements, public: base } = yield* server
      const a = yield* newKey(admin, "A")
      const b = yield* newKey(admin, "B")
      expect((yield* adminRequest(admin, "POST", `/v1/keys/${a.id}/disable`)).status).toBe(204)

      // "401 | Missing, invalid or disabled key": A's first try is looked up once, then remembered as revoked.
      const before = keyStatements()
      for (let i = 0; i < 5; i++) {
        const answer = yield* performList(base, a.key)
        expect(answer.status).toBe(401)
        expect(answer.json).toEqual(UNAUTHORIZED)
      }
      const over = yield* performList(base, a.key)
      expect(over.status).toBe(429)
      expect(over.json).toEqual({ error: TOO_MANY, retryAfterSeconds: Number(over.headers.get("retry-after")) })
      expect(keyStatements() - before).toBe(1)

      // B, from the same address, within its own 60 a minute: served, none of its answers held.
      const subscribed = yield* timed(request("POST", `${base}/subscribe`, {
        headers: jsonWith(b.key),
        body: JSON.stringify({ targetUrl: "https://hooks.example.com/b", event: "lead" })
      }))
      // "Response: 201 Created, JSON body with id (UUID string)."
      expect(subscribed.answer.status).toBe(201)
      const id = (subscribed.answer.json as { id: string }).id
      expect(id).toMatch(/^[0-9a-f-]{36}$/)
      const listed = yield* timed(performList(base, b.key))
      expect(listed.answer.status).toBe(200)
      expect(Array.isArray(listed.answer.json)).toBe(true)
      // "Response: 204 No Content with no body."
      const removed = yield* timed(request("DELETE", `${base}/subscribe/${id}`, { headers: bearer(b.key) }))
      expect(removed.answer.status).toBe(204)
      expect(removed.answer.text).toBe("")
      for (const answer of [subscribed, listed, removed]) expect(answer.ms).toBeLessThan(HOLD_MS)

      // A is still refused — held, and without a query.
      const keyStatementsBeforeA = keyStatements()
      const held = yield* timed(performList(base, a.key))
      expect(held.answer.status).toBe(429)
      expect(held.answer.json).toEqual({ error: TOO_MANY, retryAfterSeconds: Number(held.answer.headers.get("retry-after")) })
      expect(held.ms).toBeGreaterThanOrEqual(HOLD_MS - 50)
      expect(keyStatements()).toBe(keyStatementsBeforeA)
    }), { timeout: 60_000 })

  it.scoped("\"An invalid key gives 401\": forged keys (the right shape, a wrong tag) and malformed keys get the Error object, then the address's 429, and never a query", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* MinuteWindow.withinOne()
      const { admin, keyStatements, public: base } = yield* server
      const valid = yield* newKey(admin, "C")
      const forged = () => `crk_${randomBytes(48).toString("base64url")}`
      const before = keyStatements()
      for (const key of [forged(), "crk_not-a-key", forged(), "", forged()]) {
        const answer = yield* performList(base, key)
        expect(answer.status).toBe(401)
        expect(answer.json).toEqual(UNAUTHORIZED)
      }
      const refused = yield* performList(base, forged())
      expect(refused.status).toBe(429)
      expect(refused.json).toEqual({ error: TOO_MANY, retryAfterSeconds: Number(refused.headers.get("retry-after")) })
      expect(keyStatements()).toBe(before)
      // The same address's valid key is served at once.
      const served = yield* timed(performList(base, valid.key))
      expect(served.answer.status).toBe(200)
      expect(served.ms).toBeLessThan(HOLD_MS)
    }), { timeout: 60_000 })

  it.scoped("keys issued before tags keep working: one this replica saw valid is served from a refused address, at once; one it never saw gets the address's 429 until it is reissued", () =>
    Effect.gen(function*() {
      yield* resetCounts
      yield* MinuteWindow.withinOne()
      const { admin, public: base } = yield* server
      const seen = yield* legacyKey(admin, "D")
      const unseen = yield* legacyKey(admin, "E")
      expect((yield* performList(base, seen)).status).toBe(200)
      // Another account's unknown key of the same form takes the address over the limit (the shared count).
      const unknown = `crk_${randomBytes(32).toString("base64url")}`
      for (let i = 0; i < 5; i++) expect((yield* performList(base, unknown)).status).toBe(401)
      expect((yield* performList(base, unknown)).status).toBe(429)
      const served = yield* timed(performList(base, seen))
      expect(served.answer.status).toBe(200)
      expect(served.ms).toBeLessThan(HOLD_MS)
      const refused = yield* performList(base, unseen)
      expect(refused.status).toBe(429)
      expect(refused.json).toEqual({ error: TOO_MANY, retryAfterSeconds: Number(refused.headers.get("retry-after")) })
    }), { timeout: 60_000 })
})
