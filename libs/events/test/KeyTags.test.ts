/**
 * Keys that carry their own tag: a forged or malformed key is refused without
 * a query, a key issued before tags still authenticates, and the tag's secret
 * (sealed in the Vault) outlives a data-key rotation and a master-key change.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { IntegrationKeys } from "../src/IntegrationKeys.js"
import * as KeyTags from "../src/KeyTags.js"

/** Fresh Event API key services whose tags are sealed under `keys`, over the database of the context. */
const keysUnder = (keys: Vault.MasterKeys) =>
  Effect.map(
    Layer.build(Layer.fresh(IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerWith(keys))))),
    (context) => Context.get(context, IntegrationKeys)
  )

/** The master keys of the file's database (the tag's secret is sealed under them once). */
const MASTER = Vault.randomMasterKeys()

/** `effect`, and the statements it sent to the database. */
const counting = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    let statements = 0
    return Effect.map(
      Statement.withTransformer(effect, (statement) => Effect.sync(() => (statements++, statement))),
      (result) => [result, statements] as const
    )
  })

/** `key` with one character of its random part changed: the right shape, a wrong tag. */
const forge = (key: string) => key.slice(0, 10) + (key[10] === "A" ? "B" : "A") + key.slice(11)

describe("KeyTags", () => {
  it.layer(Accounts.Default.pipe(Layer.provideMerge(TestDatabase.layer)))((it) => {
    it.scoped("Authentication rule 2, \"An invalid key gives 401\": a key of the right shape with a wrong tag, and a malformed key, are refused without a database query", () =>
      Effect.gen(function*() {
        const keys = yield* keysUnder(MASTER)
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const created = Redacted.value((yield* keys.create(account.id)).key)
        const tagger = yield* keys.tagger
        expect(tagger.shape(created)).toBe("tagged")
        const forged = [forge(created), `crk_${randomBytes(48).toString("base64url")}`]
        const malformed = ["", "crk_not-a-key", `crk_${"a".repeat(500)}`, `xyz_${created.slice(4)}`, `${created}=`]
        for (const key of forged) expect(tagger.shape(key)).toBe("forged")
        for (const key of malformed) expect(tagger.shape(key)).toBe("malformed")
        for (const key of [...forged, ...malformed]) {
          expect(yield* counting(keys.authorize(Redacted.make(key)))).toEqual([Option.none(), 0])
          expect(yield* counting(keys.authenticate(Redacted.make(key)))).toEqual([Option.none(), 0])
        }
        // The real key still costs its one statement.
        const [authorized, statements] = yield* counting(keys.authorize(Redacted.make(created)))
        expect(Option.isSome(authorized)).toBe(true)
        expect(statements).toBeGreaterThanOrEqual(1)
      }))

    it.scoped("Authentication rule 1, \"The account is taken from the key\": a key issued before tags (crk_ and 43 characters) keeps authenticating and counting", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const keys = yield* keysUnder(MASTER)
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const legacy = `crk_${randomBytes(32).toString("base64url")}`
        const [row] = yield* sql<{ id: string }>`INSERT INTO integration_keys (account_id, secret_hash, last_four)
          VALUES (${account.id}, ${createHash("sha256").update(legacy).digest()}, ${legacy.slice(-4)}) RETURNING id`
        expect((yield* keys.tagger).shape(legacy)).toBe("legacy")
        expect(yield* keys.authenticate(Redacted.make(legacy))).toEqual(Option.some({ keyId: row!.id, accountId: account.id }))
        const authorized = Option.getOrThrow(yield* keys.authorize(Redacted.make(legacy)))
        expect(authorized.key).toEqual({ keyId: row!.id, accountId: account.id })
        expect(authorized.decision.allowed).toBe(true)
        // An unknown key of the old form is looked up (only the database can tell), and refused.
        expect(yield* keys.authorize(Redacted.make(`crk_${randomBytes(32).toString("base64url")}`))).toEqual(Option.none())
      }))

    it.scoped("keys issued before a data-key rotation and a MASTER_KEY change keep their tag (the secret is sealed once, re-sealed with the rest)", () =>
      Effect.gen(function*() {
        const old = MASTER
        const account = yield* (yield* Accounts).create({ name: "A", mode: "live" })
        const issued = yield* (yield* keysUnder(old)).create(account.id)
        // MASTER_KEY changes: the new key current, the old one previous, and a rotation re-seals every secret.
        const next = Vault.randomMasterKeys()
        const vault = Context.get(yield* Layer.build(Layer.fresh(Vault.layer({ current: next.current, previous: [old.current] }))), Vault.Vault)
        yield* vault.rotate()
        // Then the old master key is gone.
        const keys = yield* keysUnder(next)
        expect((yield* keys.tagger).shape(Redacted.value(issued.key))).toBe("tagged")
        expect(Option.map(yield* keys.authenticate(issued.key), (key) => key.keyId)).toEqual(Option.some(issued.id))
        // A replica under the new key issues keys under the same secret.
        const fresh = yield* (yield* keysUnder(next)).create(account.id)
        expect(Option.isSome(yield* keys.authenticate(fresh.key))).toBe(true)
      }))
  })
})
