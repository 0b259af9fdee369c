import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Events } from "@crm-relay/contract"
import { Effect, Option, Redacted, TestClock } from "effect"
import { createHash } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { IntegrationKeys, KEY_PREFIX, rateLimitSubject } from "../src/IntegrationKeys.js"
import { Preview } from "../src/Preview.js"
import { RateLimiter } from "../src/RateLimiter.js"
import { ServicesLive } from "./support/Services.js"

/** The key with its last character changed: always another key (a fixed replacement equals it when it is that character). */
const tamper = (key: string): string => key.slice(0, -1) + (key.endsWith("x") ? "y" : "x")

describe("IntegrationKeys", () => {
  it.layer(ServicesLive)((it) => {
    it.effect("Integration key: created with a random secret, stored only as its SHA-256", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* (yield* Accounts).create({ name: "Acme", mode: "live" })
        const created = yield* (yield* IntegrationKeys).create(account.id)
        const secret = Redacted.value(created.key)
        expect(secret.startsWith(KEY_PREFIX)).toBe(true)
        // 32 random bytes and their 16-byte tag, in base64url (see KeyTags).
        expect(secret.length).toBe(KEY_PREFIX.length + 64)
        const rows = yield* sql<Record<string, unknown>>`SELECT * FROM integration_keys WHERE id = ${created.id}`
        expect(rows).toHaveLength(1)
        expect(rows[0]!["secret_hash"]).toEqual(createHash("sha256").update(secret).digest())
        expect(JSON.stringify(rows[0])).not.toContain(secret.slice(KEY_PREFIX.length, KEY_PREFIX.length + 16))
        expect(String(created.key)).not.toContain(secret)
      }))

    it.effect("Authentication rule 1: the account is determined by the key", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const a = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const b = yield* (yield* Accounts).create({ name: "B", mode: "demo" })
        const keyA = yield* keys.create(a.id)
        const keyB = yield* keys.create(b.id)
        expect(yield* keys.authenticate(keyA.key)).toEqual(Option.some({ keyId: keyA.id, accountId: a.id }))
        expect(yield* keys.authenticate(keyB.key)).toEqual(Option.some({ keyId: keyB.id, accountId: b.id }))
      }))

    it.effect("Authentication rule 2: an invalid key is refused (wrong, empty, oversized)", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const created = yield* keys.create(account.id)
        const tampered = tamper(Redacted.value(created.key))
        for (const token of [tampered, "", "crk_" + "a".repeat(500)]) {
          expect(yield* keys.authenticate(Redacted.make(token))).toEqual(Option.none())
        }
      }))

    it.effect("Authentication rule 3: any active key of the same account works (many keys per account)", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const account = yield* (yield* Accounts).create({ name: "A", mode: "sandbox" })
        const created = yield* Effect.all([keys.create(account.id), keys.create(account.id), keys.create(account.id)])
        expect(new Set(created.map((k) => Redacted.value(k.key))).size).toBe(3)
        for (const key of created) {
          expect(Option.map(yield* keys.authenticate(key.key), (k) => k.accountId)).toEqual(Option.some(account.id))
        }
      }))

    it.effect("a disabled key no longer authenticates; disabling is idempotent and leaves other keys working", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const off = yield* keys.create(account.id)
        const on = yield* keys.create(account.id)
        yield* keys.disable(off.id)
        yield* keys.disable(off.id)
        expect(yield* keys.authenticate(off.key)).toEqual(Option.none())
        expect(Option.isSome(yield* keys.authenticate(on.key))).toBe(true)
      }))

    it.effect("Limits: 60 requests per key per minute — authorize finds the key and counts it in the limiter's row, in one statement", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const limiter = yield* RateLimiter
        yield* TestClock.setTime(Date.parse("2030-03-01T00:00:00Z"))
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const key = yield* keys.create(account.id)
        const first = yield* keys.authorize(key.key)
        expect(first).toEqual(Option.some({
          key: { keyId: key.id, accountId: account.id },
          decision: { allowed: true, count: 1, retryAfterSeconds: 60 }
        }))
        // The same row as RateLimiter.hit: replicas and both paths share one count.
        yield* Effect.forEach(Array.from({ length: 58 }), () => limiter.hit(rateLimitSubject(key.id)))
        yield* TestClock.adjust("20 seconds")
        expect(Option.map(yield* keys.authorize(key.key), (a) => a.decision)).toEqual(
          Option.some({ allowed: true, count: 60, retryAfterSeconds: 40 })
        )
        expect(Option.map(yield* keys.authorize(key.key), (a) => a.decision)).toEqual(
          Option.some({ allowed: false, count: 61, retryAfterSeconds: 40 })
        )
        yield* TestClock.adjust("40 seconds")
        expect(Option.map(yield* keys.authorize(key.key), (a) => a.decision.count)).toEqual(Option.some(1))
      }))

    it.effect("Limits: a minute's last millisecond counts in it, the next minute's first starts at 1, a lagging replica counts into the newest minute — also once the session keeps the statements' plans", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const keys = yield* IntegrationKeys
        const limiter = yield* RateLimiter
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const key = yield* keys.create(account.id)
        const decision = Effect.map(keys.authorize(key.key), (a) => Option.getOrThrow(a).decision)
        // One session (a transaction holds its connection): past its first five calls PostgreSQL
        // may run a function's statement on the plan it kept.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2030-04-01T00:00:59.999Z"))
          const last = yield* Effect.forEach(Array.from({ length: 8 }), () => decision)
          expect(last.map((d) => d.count)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
          expect(last[7]).toEqual({ allowed: true, count: 8, retryAfterSeconds: 1 })
          yield* TestClock.setTime(Date.parse("2030-04-01T00:01:00.000Z"))
          expect(yield* decision).toEqual({ allowed: true, count: 1, retryAfterSeconds: 60 })
          yield* TestClock.setTime(Date.parse("2030-04-01T00:00:59.999Z"))
          expect(yield* decision).toMatchObject({ allowed: true, count: 2 })
        }))
        // The same row as RateLimiter.hit, still in the newest minute.
        yield* TestClock.setTime(Date.parse("2030-04-01T00:01:30.000Z"))
        expect(yield* limiter.hit(rateLimitSubject(key.id))).toEqual({ allowed: true, count: 3, retryAfterSeconds: 30 })
      }))

    it.effect("GET /perform-list in one round trip: authorize reads the preview in its own statement, and nothing for a request over the limit (60 per key per minute)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const keys = yield* IntegrationKeys
        const preview = yield* Preview
        const limiter = yield* RateLimiter
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const key = yield* keys.create(account.id)
        const alongside = (accountId: Statement.Fragment) => preview.latest(accountId, 3)
        // The key's first use also records when it was used (once a minute, by the database's
        // clock): count the requests after it, at that time.
        yield* keys.authorize(key.key, alongside)
        const [used] = yield* sql<{ last_used_at: Date }>`SELECT last_used_at FROM integration_keys WHERE id = ${key.id}`
        yield* TestClock.setTime(used!.last_used_at.getTime())
        let statements = 0
        const counted = Statement.withTransformer((statement) => Effect.sync(() => (statements++, statement)))
        const allowed = Option.getOrThrow(yield* counted(keys.authorize(key.key, alongside)))
        expect(statements).toBe(1)
        expect(allowed.decision.allowed).toBe(true)
        expect(yield* preview.records(allowed.alongside)).toEqual([Events.SAMPLE_PREVIEW])
        expect(yield* preview.records(allowed.alongside)).toEqual(yield* preview.list(account.id, 3))
        // The rest of the minute's 60, then the 61st.
        yield* Effect.forEach(Array.from({ length: 60 - allowed.decision.count }), () => limiter.hit(rateLimitSubject(key.id)))
        const refused = Option.getOrThrow(yield* keys.authorize(key.key, alongside))
        expect(refused.decision).toMatchObject({ allowed: false, count: 61 })
        expect(refused.alongside).toBeUndefined()
      }))

    it.effect("Authentication rule 2: authorize refuses a wrong, empty, oversized or disabled key and counts nothing for it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const keys = yield* IntegrationKeys
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const created = yield* keys.create(account.id)
        const off = yield* keys.create(account.id)
        yield* keys.disable(off.id)
        const tampered = tamper(Redacted.value(created.key))
        for (const token of [Redacted.make(tampered), Redacted.make(""), Redacted.make("crk_" + "a".repeat(500)), off.key]) {
          expect(yield* keys.authorize(token)).toEqual(Option.none())
        }
        const counted = yield* sql<{ subject: string }>`SELECT subject FROM rate_limits WHERE subject IN (${rateLimitSubject(created.id)}, ${rateLimitSubject(off.id)})`
        expect(counted).toEqual([])
      }))

    it.effect("Accounts: created with a mode, found by id; unknown or malformed ids find nothing", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const created = yield* accounts.create({ name: "Demo shop", mode: "demo" })
        expect(yield* accounts.find(created.id)).toEqual(Option.some(created))
        expect(yield* accounts.find("00000000-0000-4000-8000-000000000000")).toEqual(Option.none())
        expect(yield* accounts.find("nope")).toEqual(Option.none())
      }))

    it.effect("unknown accounts and keys are typed errors", () =>
      Effect.gen(function*() {
        const keys = yield* IntegrationKeys
        const unknown = "00000000-0000-4000-8000-000000000000"
        expect(yield* keys.create(unknown).pipe(Effect.flip)).toMatchObject({ _tag: "AccountNotFound" })
        expect(yield* keys.create("not-a-uuid").pipe(Effect.flip)).toMatchObject({ _tag: "AccountNotFound" })
        expect(yield* keys.disable(unknown).pipe(Effect.flip)).toMatchObject({ _tag: "KeyNotFound" })
        expect(yield* keys.disable("nope").pipe(Effect.flip)).toMatchObject({ _tag: "KeyNotFound" })
      }))
  })
})
