/**
 * The tag an integration key carries, so a forged key is told from a real one
 * without the database: a new key is `crk_` and the base64url of 32 random
 * bytes followed by the first 16 bytes of their HMAC-SHA256 under the key-tag
 * secret (64 characters). A key of that shape whose tag does not match is
 * forged; it is refused in constant time and costs no query.
 *
 * The secret is random and sealed once in the Vault (a `vault_secrets` row of
 * its own): a data-key rotation re-seals it and a MASTER_KEY change re-wraps
 * its data key, so keys issued before either keep working. Keys issued before
 * tags (`crk_` and 43 characters) are legacy: only the database can tell them.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Vault from "@crm-relay/store/Vault"
import { Context, Effect, Layer, Redacted } from "effect"
import { createHmac, createSecretKey, randomBytes, timingSafeEqual } from "node:crypto"

/** What a presented key is, before any query. */
export type Shape =
  /** A new key whose tag matches: maybe active, maybe disabled (only the database knows). */
  | "tagged"
  /** A new key's shape with a tag that does not match: never issued. */
  | "forged"
  /** A key of the form issued before tags: only the database can tell. */
  | "legacy"
  /** Neither form: never issued. */
  | "malformed"

/** Issues tagged keys and reads a presented key's shape, synchronously. */
export interface Tagger {
  /** A new key (the secret shown once). */
  readonly issue: () => string
  readonly shape: (key: string) => Shape
}

const PREFIX = "crk_"
const RANDOM_BYTES = 32
const TAG_BYTES = 16
/** `crk_` and base64url of 48 bytes, which has no padding and one spelling per value. */
const TAGGED = /^crk_[A-Za-z0-9_-]{64}$/
const LEGACY = /^crk_[A-Za-z0-9_-]{43}$/

/** The pattern of every key ever issued, tagged or legacy (for clients that check a pasted key). */
export const KEY_PATTERN = "^crk_(?:[A-Za-z0-9_-]{43}|[A-Za-z0-9_-]{64})$"

/** The tagger over `secret` (32 bytes). */
export const tagger = (secret: Uint8Array): Tagger => {
  // A KeyObject, made once: given raw bytes, each HMAC first asks whether they are a KeyObject
  // (node:crypto's isKeyObject), which was about 5 % of GET /perform-list's CPU.
  const key = createSecretKey(secret)
  // Domain-separated, so the secret can never sign anything but key tags.
  const tagOf = (random: Uint8Array): Buffer =>
    createHmac("sha256", key).update("crm-relay/integration-key-tag/v1\u0000").update(random).digest().subarray(0, TAG_BYTES)
  return {
    issue: () => {
      const random = randomBytes(RANDOM_BYTES)
      return PREFIX + Buffer.concat([random, tagOf(random)]).toString("base64url")
    },
    shape: (key) => {
      if (key.length === PREFIX.length + 43) return LEGACY.test(key) ? "legacy" : "malformed"
      if (key.length !== PREFIX.length + 64 || !TAGGED.test(key)) return "malformed"
      const bytes = Buffer.from(key.slice(PREFIX.length), "base64url")
      return timingSafeEqual(bytes.subarray(RANDOM_BYTES), tagOf(bytes.subarray(0, RANDOM_BYTES))) ? "tagged" : "forged"
    }
  }
}

/** The key-tag secret, loaded (or created) on first use: after the migrations, whenever the Layer is built. */
export class KeyTags extends Context.Tag("@crm-relay/events/KeyTags")<KeyTags, {
  readonly ready: Effect.Effect<Tagger>
}>() {}

/** The owner the secret's row is bound to (its additional data): it is found by it too. */
export const AAD = "crm-relay/integration-key-tag/v1"

/** The secret sealed in the Vault of the context, created by the first replica that needs it. */
export const layer: Layer.Layer<KeyTags, never, Vault.Vault | SqlClient.SqlClient> = Layer.effect(
  KeyTags,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vault = yield* Vault.Vault
    // Replicas starting together create one secret: the lock serialises the check and the insert.
    const stored = sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.integration_key_tag'))`
      const rows = yield* sql<{ readonly id: string }>`SELECT id FROM vault_secrets WHERE aad = ${AAD} ORDER BY created_at, id LIMIT 1`
      return rows[0]?.id ?? (yield* vault.store(Redacted.make(randomBytes(32).toString("base64")), AAD))
    })).pipe(Effect.orDie)
    const load = Effect.gen(function*() {
      const id = yield* stored
      const secret = yield* Effect.orDie(vault.open(id, AAD))
      return tagger(Buffer.from(Redacted.value(secret), "base64"))
    }).pipe(Effect.withSpan("KeyTags.load"))
    // Kept once loaded; a failed load (database down at start) is tried again at the next use.
    let loaded: Tagger | undefined
    const ready = Effect.suspend(() =>
      loaded !== undefined ? Effect.succeed(loaded) : Effect.tap(load, (tags) => {
        loaded = tags
      })
    )
    return KeyTags.of({ ready })
  })
)

/** The secret sealed in a Vault under `keys`, over the database of the context. */
export const layerWith = (keys: Vault.MasterKeys): Layer.Layer<KeyTags, never, SqlClient.SqlClient> =>
  layer.pipe(Layer.provide(Vault.layer(keys)))

/** A random secret of this Layer's own (tests where one process issues and checks every key). */
export const layerTest: Layer.Layer<KeyTags> = Layer.sync(KeyTags, () => {
  const tags = tagger(randomBytes(32))
  return KeyTags.of({ ready: Effect.succeed(tags) })
})
