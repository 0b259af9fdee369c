import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Duration, Effect, Either, Exit, Layer, Logger, LogLevel, Option, Redacted, TestClock } from "effect"
import { Webhook } from "standardwebhooks"
import { Accounts } from "../src/Accounts.js"
import { CACHE_TTL_MS, SECRET_PREFIX, SigningSecrets } from "../src/SigningSecrets.js"
import * as WebhookSigner from "../src/WebhookSigner.js"

const masterKeys = Vault.randomMasterKeys()

/** Accounts and signing secrets over a fresh test database with one MASTER_KEY. */
const Live = Layer.mergeAll(Accounts.Default, SigningSecrets.Default).pipe(
  Layer.provideMerge(Vault.layer(masterKeys)),
  Layer.provideMerge(TestDatabase.layer)
)

/** A replica whose Vault counts what it seals (a secret created) and opens (a secret read). */
const countingReplica = Effect.gen(function*() {
  const vault = yield* Vault.Vault
  const calls = { store: 0, open: 0 }
  const counting = Vault.Vault.of({
    ...vault,
    store: (plaintext, aad) => Effect.zipRight(Effect.sync(() => calls.store++), vault.store(plaintext, aad)),
    open: (id, aad, read) => Effect.zipRight(Effect.sync(() => calls.open++), vault.open(id, aad, read))
  })
  const service = yield* Effect.provide(SigningSecrets, SigningSecrets.Default.pipe(Layer.provide(Layer.succeed(Vault.Vault, counting))))
  return { service, calls }
})

/** Another replica's service: its own Vault and cache over the same database. */
const replica = Effect.provide(SigningSecrets, SigningSecrets.Default.pipe(Layer.provide(Vault.layer(masterKeys))))

describe("SigningSecrets", () => {
  it.layer(Live)((it) => {
    it.effect("Delivery rule: each account signs with its own whsec_ secret (base64 of 32 random bytes), created on first use and the same ever after", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const secrets = yield* SigningSecrets
        const a = yield* accounts.create({ name: "A", mode: "live" })
        const b = yield* accounts.create({ name: "B", mode: "live" })
        const first = Redacted.value(yield* secrets.get(a.id))
        expect(first.startsWith(SECRET_PREFIX)).toBe(true)
        expect(Buffer.from(first.slice(SECRET_PREFIX.length), "base64").length).toBe(32)
        expect(Redacted.value(yield* secrets.get(a.id))).toBe(first)
        expect(Redacted.value(yield* secrets.get(b.id))).not.toBe(first)
        // Another replica (own cache, own Vault) reads the same secret.
        const other = yield* replica
        expect(Redacted.value(yield* other.get(a.id))).toBe(first)

        // The secret works with the Standard Webhooks library.
        const webhook = new Webhook(first)
        const payload = JSON.stringify({ id: "evt_1", event: "lead" })
        // One instant for the signature and its header: read twice, they may fall on two sides of a second.
        const at = new Date(Math.floor(Date.now() / 1000) * 1000)
        const signature = webhook.sign("msg_1", at, payload)
        const verified = webhook.verify(payload, {
          "webhook-id": "msg_1",
          "webhook-timestamp": String(at.getTime() / 1000),
          "webhook-signature": signature
        })
        expect(verified).toEqual({ id: "evt_1", event: "lead" })
      }))

    it.effect("the secret is stored only sealed by the Vault, bound to its account", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* (yield* Accounts).create({ name: "Sealed", mode: "live" })
        const secret = Redacted.value(yield* (yield* SigningSecrets).get(account.id))
        const rows = yield* sql<Record<string, unknown>>`
          SELECT s.*, v.* FROM signing_secrets s JOIN vault_secrets v ON v.id = s.secret_id WHERE s.account_id = ${account.id}`
        expect(rows).toHaveLength(1)
        const dump = JSON.stringify(rows, (_, value) => (value?.type === "Buffer" ? Buffer.from(value.data).toString("latin1") : value))
        expect(dump).not.toContain(secret.slice(SECRET_PREFIX.length, SECRET_PREFIX.length + 12))
        // Moved to another account, the sealed secret no longer opens there.
        const other = yield* (yield* Accounts).create({ name: "Other", mode: "live" })
        yield* sql`INSERT INTO signing_secrets (account_id, secret_id) SELECT ${other.id}, secret_id FROM signing_secrets WHERE account_id = ${account.id}`
        const fresh = yield* replica
        const exit = yield* Effect.exit(fresh.get(other.id))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(String(exit)).not.toContain(secret)
      }))

    it.effect("concurrent first uses on several replicas agree on one secret and store exactly one", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const account = yield* (yield* Accounts).create({ name: "Race", mode: "live" })
        const replicas = yield* Effect.all([replica, replica, replica, replica])
        const got = yield* Effect.forEach(
          [...replicas, ...replicas],
          (service) => Effect.map(service.get(account.id), Redacted.value),
          { concurrency: "unbounded" }
        )
        expect(new Set(got).size).toBe(1)
        const stored = yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM signing_secrets WHERE account_id = ${account.id}`
        expect(stored[0]!.n).toBe(1)
        // The losers' sealed secrets were removed, not left behind.
        const orphans = yield* sql<{ n: number }>`
          SELECT count(*)::int4 AS n FROM vault_secrets v
          WHERE v.aad LIKE ${`%${account.id}%`} AND NOT EXISTS (SELECT 1 FROM signing_secrets s WHERE s.secret_id = v.id)`
        expect(orphans[0]!.n).toBe(0)
      }))

    it.effect("rotation: during the overlap a delivery carries both signatures (Standard Webhooks' several signatures), so a receiver holding either secret verifies it; after the overlap only the new one signs", () =>
      Effect.gen(function*() {
        const secrets = yield* SigningSecrets
        const account = yield* (yield* Accounts).create({ name: "Rotating", mode: "live" })
        const old = Redacted.value(yield* secrets.get(account.id))
        const rotated = yield* secrets.rotate(account.id, Duration.hours(1))
        const fresh = Redacted.value(rotated.current)
        expect(fresh).not.toBe(old)
        expect(Option.map(rotated.previous, Redacted.value)).toEqual(Option.some(old))
        // Another replica reads the same set.
        const other = yield* replica
        const seen = yield* other.signing(account.id)
        expect(Redacted.value(seen.current)).toBe(fresh)
        expect(Option.map(seen.previous, Redacted.value)).toEqual(Option.some(old))

        const sign = (set: typeof rotated) => {
          const key = Either.getOrThrow(WebhookSigner.signingKey(set.current))
          const previous = Option.getOrUndefined(Option.map(set.previous, (p) => Either.getOrThrow(WebhookSigner.signingKey(p))))
          const timestamp = Math.floor(Date.now() / 1000)
          const body = JSON.stringify({ id: "evt_r", event: "lead" })
          return { body, headers: WebhookSigner.headers({ key, previous, id: "msg_r", timestamp, body }) }
        }
        const during = sign(rotated)
        expect(during.headers["webhook-signature"]!.split(" ")).toHaveLength(2)
        for (const secret of [old, fresh]) {
          expect(new Webhook(secret).verify(during.body, during.headers)).toEqual({ id: "evt_r", event: "lead" })
        }

        yield* TestClock.adjust(Duration.hours(1))
        const after = yield* secrets.signing(account.id)
        expect(Option.isNone(after.previous)).toBe(true)
        const signed = sign(after)
        expect(signed.headers["webhook-signature"]!.split(" ")).toHaveLength(1)
        expect(new Webhook(fresh).verify(signed.body, signed.headers)).toEqual({ id: "evt_r", event: "lead" })
        expect(() => new Webhook(old).verify(signed.body, signed.headers)).toThrow()
      }))

    it.effect("a second rotation removes the secret before the previous one: at most two secrets sign", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const secrets = yield* SigningSecrets
        const account = yield* (yield* Accounts).create({ name: "Twice", mode: "live" })
        const first = Redacted.value(yield* secrets.get(account.id))
        const second = yield* secrets.rotate(account.id)
        const third = yield* secrets.rotate(account.id)
        expect(Option.map(third.previous, Redacted.value)).toEqual(Option.some(Redacted.value(second.current)))
        expect([Redacted.value(third.current), ...Option.toArray(Option.map(third.previous, Redacted.value))]).not.toContain(first)
        const sealed = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM vault_secrets WHERE aad = ${JSON.stringify(["crm-relay/signing-secret/v1", account.id])}`
        expect(sealed[0]!.n).toBe(2)
      }))

    it.effect("a claim of deliveries meeting a cold cache costs one read: 64 asking at once for a new account create one secret and read it once, and 64 more after CACHE_TTL_MS read it once again", () =>
      Effect.gen(function*() {
        const account = yield* (yield* Accounts).create({ name: "Burst", mode: "live" })
        const { calls, service } = yield* countingReplica
        const burst = () =>
          Effect.forEach(Array.from({ length: 64 }), () => Effect.map(service.signing(account.id), (set) => Redacted.value(set.current)), {
            concurrency: "unbounded"
          })
        const first = yield* burst()
        expect(new Set(first).size).toBe(1)
        // One secret sealed, and opened once (read back after its creation).
        expect(calls).toEqual({ store: 1, open: 1 })
        yield* burst()
        expect(calls).toEqual({ store: 1, open: 1 })
        yield* TestClock.adjust(Duration.millis(CACHE_TTL_MS))
        const again = yield* burst()
        expect(again).toEqual(first)
        expect(calls).toEqual({ store: 1, open: 2 })
        // An unknown account is answered AccountNotFound to every asker, and nothing is kept for it.
        const unknown = yield* Effect.forEach(
          Array.from({ length: 8 }),
          () => Effect.either(service.signing("0f8fad5b-d9cb-469f-a165-70867728950e")),
          { concurrency: "unbounded" }
        )
        expect(unknown.map((r) => Either.isLeft(r) && r.left._tag)).toEqual(Array(8).fill("AccountNotFound"))
      }))

    it.effect("an unknown account has no secret (AccountNotFound), whatever the id looks like", () =>
      Effect.gen(function*() {
        const secrets = yield* SigningSecrets
        for (const id of ["0f8fad5b-d9cb-469f-a165-70867728950e", "not-a-uuid", ""]) {
          const result = yield* Effect.either(secrets.get(id))
          expect(Either.isLeft(result) && result.left._tag).toBe("AccountNotFound")
        }
      }))

    it.effect("secrets never appear in logs: creating and reading a signing secret logs nothing that contains it", () =>
      Effect.gen(function*() {
        const lines: Array<string> = []
        const logger = Logger.make(({ annotations, message }) => {
          lines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations) }))
        })
        const account = yield* (yield* Accounts).create({ name: "Quiet", mode: "live" })
        const secret = yield* (yield* SigningSecrets).get(account.id).pipe(
          Effect.tap((s) => Effect.logInfo("got the secret", s)),
          Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
          Logger.withMinimumLogLevel(LogLevel.All)
        )
        expect(lines.length).toBeGreaterThan(0)
        expect(lines.join("\n")).not.toContain(Redacted.value(secret))
      }))
  })
})
