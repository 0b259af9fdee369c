/**
 * Integration keys: many per account; the secret is random, shown once at
 * creation and stored only as its SHA-256.
 *
 * Why SHA-256 and not a password hash (scrypt, argon2): the secret is 256
 * bits from the CSPRNG, so guessing it is infeasible however fast the hash
 * is; slow password hashing protects low-entropy secrets and would only add
 * tens of milliseconds of CPU to every API request. A leaked table reveals
 * hashes, not usable keys. The lookup is by hash (unique index); the stored
 * and computed digests are then compared in constant time.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import * as Spans from "@crm-relay/store/Spans"
import { Clock, Data, Effect, Option, Redacted, Schema } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { AccountId } from "./Accounts.js"
import { KeyTags, type Shape } from "./KeyTags.js"
import * as RateLimiter from "./RateLimiter.js"
import { type Page, pageOf, type UnknownCursor } from "./Page.js"
import { IntegrationKeyId } from "@crm-relay/contract/Accounts"

/** Described in the contract, with the account payloads. */
export { IntegrationKeyId }

/** Every key starts with this, so leaked keys are easy to recognise (and scan for). */
export const KEY_PREFIX = "crk_"

/** Every form a key was ever issued in (see KeyTags). */
export { KEY_PATTERN } from "./KeyTags.js"

/** The account of `create` does not exist. */
export class AccountNotFound extends Data.TaggedError("AccountNotFound")<{ readonly accountId: string }> {}

/** The key of `disable` does not exist. */
export class KeyNotFound extends Data.TaggedError("KeyNotFound")<{ readonly keyId: string }> {}

/** A new key: its id and the secret, which is never available again. */
export interface CreatedKey {
  readonly id: IntegrationKeyId
  readonly key: Redacted.Redacted<string>
}

/** The key and account an authenticated request acts for. */
export interface Authenticated {
  readonly keyId: IntegrationKeyId
  readonly accountId: AccountId
}

/** A key authenticated together with this request's place in its rate-limit window. */
export interface Authorized {
  readonly key: Authenticated
  readonly decision: RateLimiter.RateLimitDecision
  /** The value `authorize`'s `alongside` read; undefined when none was asked for or the request is over the limit. */
  readonly alongside: unknown
}

/**
 * A read done by the statement that authorizes a key, for the key's account: an SQL expression of
 * one value over `accountId` (itself an SQL expression). It is evaluated only for a request within
 * the limit, so a refused request reads nothing.
 */
export type Alongside = (accountId: Statement.Fragment) => Statement.Fragment

/** The rate-limit subject of an integration key: every replica counts a key's requests in this one row. */
export const rateLimitSubject = (keyId: string): string => `${SUBJECT_PREFIX}${keyId}`
const SUBJECT_PREFIX = "integration-key:"

/** A key in the operator's listing: never the key, only its last four characters. */
export const KeySummary = Schema.Struct({
  id: IntegrationKeyId,
  /** What the account called it (null: no label). */
  label: Schema.NullOr(Schema.String),
  /** Null for keys created before the last four characters were kept. */
  last_four: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromSelf,
  /** The latest authenticated request, to the minute (null: never used). */
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  disabled_at: Schema.NullOr(Schema.DateFromSelf)
}).annotations({ identifier: "KeySummary" })
export type KeySummary = typeof KeySummary.Type

/** `last_used_at` is written at most this often per key: the Event API's auth path stays read-only. */
export const LAST_USED_RESOLUTION_MS = 60_000

/** The row of `integration_key_authorize` (with the request's count), as the driver gives it. */
const AuthorizedRow = Schema.Struct({
  id: IntegrationKeyId,
  account_id: AccountId,
  secret_hash: Schema.Uint8ArrayFromSelf,
  last_used_at: Schema.NullOr(Schema.DateFromSelf),
  count: Schema.Number,
  window_start: Schema.DateFromSelf
})

/** `Schema.UUID`'s pattern. */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/**
 * Whether `row` is an `AuthorizedRow` already: the check `decodeAuthorized` makes, written out for
 * the row of every Event API request (through the Schema it was 2 % of GET /perform-list's CPU).
 * A row it refuses is decoded by the Schema, whose failure says what is wrong.
 */
const isAuthorizedRow = (row: unknown): row is typeof AuthorizedRow.Type => {
  if (typeof row !== "object" || row === null) return false
  const r = row as Record<string, unknown>
  return typeof r["id"] === "string" && UUID.test(r["id"]) &&
    typeof r["account_id"] === "string" && UUID.test(r["account_id"]) &&
    r["secret_hash"] instanceof Uint8Array &&
    (r["last_used_at"] === null || r["last_used_at"] instanceof Date) &&
    typeof r["count"] === "number" &&
    r["window_start"] instanceof Date
}

const digest = (secret: string): Buffer => createHash("sha256").update(secret, "utf8").digest()

/** Creates, disables and authenticates integration keys. */
export class IntegrationKeys extends Effect.Service<IntegrationKeys>()("@crm-relay/events/IntegrationKeys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const tags = yield* KeyTags

    const insert = SqlSchema.findOne({
      Request: Schema.Struct({
        accountId: Schema.String,
        hash: Schema.Uint8ArrayFromSelf,
        lastFour: Schema.String,
        label: Schema.NullOr(Schema.String)
      }),
      Result: Schema.Struct({ id: IntegrationKeyId }),
      execute: ({ accountId, hash, label, lastFour }) =>
        sql`INSERT INTO integration_keys (account_id, secret_hash, last_four, label)
            SELECT id, ${hash}, ${lastFour}, ${label} FROM accounts WHERE id = ${accountId}
            RETURNING id`
    })
    const disableById = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ id: IntegrationKeyId }),
      execute: (id) =>
        sql`UPDATE integration_keys SET disabled_at = COALESCE(disabled_at, now()) WHERE id = ${id} RETURNING id`
    })
    const activeByHash = SqlSchema.findOne({
      Request: Schema.Uint8ArrayFromSelf,
      Result: Schema.Struct({
        id: IntegrationKeyId,
        account_id: AccountId,
        secret_hash: Schema.Uint8ArrayFromSelf,
        last_used_at: Schema.NullOr(Schema.DateFromSelf)
      }),
      execute: (hash) =>
        sql`SELECT id, account_id, secret_hash, last_used_at FROM integration_keys
            WHERE secret_hash = ${hash} AND disabled_at IS NULL`
    })
    // The guard keeps concurrent requests (and replicas) from writing the same minute twice.
    const touch = (id: string) =>
      sql`UPDATE integration_keys SET last_used_at = now()
          WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')`.pipe(
        Effect.asVoid,
        Effect.catchAllCause((cause) => Effect.logWarning("Could not record when an integration key was used", cause))
      )
    const keysOf = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.String, after: Schema.NullOr(Schema.String), limit: Schema.Int }),
      Result: KeySummary,
      execute: ({ accountId, after, limit }) =>
        sql`SELECT id, label, last_four, created_at, last_used_at, disabled_at FROM integration_keys
            WHERE account_id = ${accountId}
              ${after === null ? sql`` : sql`AND seq > (SELECT seq FROM integration_keys WHERE id = ${after})`}
            ORDER BY seq LIMIT ${limit}`
    })

    const decodeAuthorized = Schema.decodeUnknown(AuthorizedRow)
    const policy = yield* RateLimiter.RateLimitPolicyRef

    // Only a tagged key whose tag matches, or a legacy one, is looked up: the others were never issued.
    // A caller that already read the key's shape passes it, so the tag's HMAC is computed once per request.
    const mayExist = (secret: string, known: Shape | undefined) =>
      Effect.map(
        known === undefined ? Effect.map(tags.ready, (tagger) => tagger.shape(secret)) : Effect.succeed(known),
        (shape) => shape === "tagged" || shape === "legacy"
      )

    // Runs on every Event API request: named by a hot path's span (see Spans).
    const authorizeSpan = Spans.hot("IntegrationKeys.authorize")
    const authorize = Effect.fnUntraced(function*(
      token: Redacted.Redacted<string>,
      alongside: Alongside | undefined,
      shape: Shape | undefined
    ) {
      const secret = Redacted.value(token)
      if (!(yield* mayExist(secret, shape))) return Option.none<Authorized>()
      const hash = digest(secret)
      const now = yield* Clock.currentTimeMillis
      // The key and its count are the database function `integration_key_authorize` (its plans are
      // kept per session); `alongside` reads only for a request within the limit.
      const rows = yield* Effect.orDie(sql`SELECT a.id, a.account_id, a.secret_hash, a.last_used_at, a.count, a.window_start${
        alongside === undefined
          ? sql``
          : sql`, CASE WHEN a.count <= ${policy.limit}::integer THEN ${alongside(sql`a.account_id`)} END AS alongside`
      } FROM integration_key_authorize(${hash}, ${SUBJECT_PREFIX}::text, ${RateLimiter.windowStart(policy, now)}::timestamptz) AS a`)
      if (rows.length === 0) return Option.none<Authorized>()
      const row = isAuthorizedRow(rows[0]) ? rows[0] : yield* Effect.orDie(decodeAuthorized(rows[0]))
      const read: unknown = (rows[0] as { readonly alongside?: unknown }).alongside ?? undefined
      // The lookup was by hash; compare the digests again in constant time before trusting the row.
      if (row.secret_hash.length !== hash.length || !timingSafeEqual(row.secret_hash, hash)) return Option.none<Authorized>()
      // Written only when the stored time is a minute old: most requests add no statement.
      if (row.last_used_at === null || now - row.last_used_at.getTime() >= LAST_USED_RESOLUTION_MS) yield* touch(row.id)
      return Option.some<Authorized>({
        key: { keyId: row.id, accountId: row.account_id },
        decision: RateLimiter.decide(policy, now, row.count, row.window_start),
        alongside: read
      })
    })

    return {
      /** Issues tagged keys and tells a forged or malformed key without a query (see KeyTags). */
      tagger: tags.ready,
      /** Creates a key for `accountId` (named `label`, when given); the returned secret is shown once and never stored. */
      create: Effect.fn("IntegrationKeys.create")(function*(accountId: string, label?: string) {
        if (!isUuid(accountId)) return yield* new AccountNotFound({ accountId })
        const secret = (yield* tags.ready).issue()
        const row = yield* Effect.orDie(insert({ accountId, hash: digest(secret), lastFour: secret.slice(-4), label: label ?? null }))
        if (Option.isNone(row)) return yield* new AccountNotFound({ accountId })
        yield* Audit.record("key.created", { account_id: accountId, key_id: row.value.id })
        return { id: row.value.id, key: Redacted.make(secret) } satisfies CreatedKey
      }),

      /** The account's key `keyId`, if it is one (the Integrations area acts only on its own account's keys). */
      find: Effect.fn("IntegrationKeys.find")(function*(accountId: string, keyId: string) {
        if (!isUuid(accountId) || !isUuid(keyId)) return Option.none<KeySummary>()
        const rows = yield* sql`SELECT id, label, last_four, created_at, last_used_at, disabled_at FROM integration_keys
          WHERE id = ${keyId} AND account_id = ${accountId}`.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(KeySummary))), Effect.orDie)
        return Option.fromNullable(rows[0])
      }),

      /** Turns a key off (idempotent); the account's subscriptions stay. */
      disable: Effect.fn("IntegrationKeys.disable")(function*(keyId: string) {
        const row = isUuid(keyId) ? yield* Effect.orDie(disableById(keyId)) : Option.none()
        if (Option.isNone(row)) return yield* new KeyNotFound({ keyId })
        yield* Audit.record("key.disabled", { key_id: keyId })
      }),

      /** The active key matching `token`, if any. */
      authenticate: Effect.fn("IntegrationKeys.authenticate")(function*(token: Redacted.Redacted<string>) {
        const secret = Redacted.value(token)
        if (!(yield* mayExist(secret, undefined))) return Option.none<Authenticated>()
        const hash = digest(secret)
        const row = yield* Effect.orDie(activeByHash(hash))
        const found = Option.filter(row, (key) => key.secret_hash.length === hash.length && timingSafeEqual(key.secret_hash, hash))
        if (Option.isNone(found)) return Option.none<Authenticated>()
        const key = found.value
        // Written only when the stored time is a minute old: most requests add no statement.
        const now = yield* Clock.currentTimeMillis
        if (key.last_used_at === null || now - key.last_used_at.getTime() >= LAST_USED_RESOLUTION_MS) yield* touch(key.id)
        return Option.some<Authenticated>({ keyId: key.id, accountId: key.account_id })
      }),

      /** A page of the account's keys, oldest first (never the keys themselves). */
      list: Effect.fn("IntegrationKeys.list")(function*(
        accountId: string,
        options: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
      ) {
        if (!isUuid(accountId)) return yield* new AccountNotFound({ accountId })
        const account = yield* sql`SELECT 1 FROM accounts WHERE id = ${accountId}`.pipe(Effect.orDie)
        if (account.length === 0) return yield* new AccountNotFound({ accountId })
        return yield* pageOf(
          options,
          (after, limit) => Effect.orDie(keysOf({ accountId, after, limit })),
          (cursor) =>
            isUuid(cursor)
              ? sql`SELECT 1 FROM integration_keys WHERE id = ${cursor} AND account_id = ${accountId}`.pipe(
                Effect.orDie,
                Effect.map((rows) => rows.length > 0)
              )
              : Effect.succeed(false)
        ) satisfies Effect.Effect<Page<KeySummary>, UnknownCursor>
      }),

      /**
       * `authenticate`, and this request counted against the key's rate limit
       * (`rate_limit_hit`, so the same row and rule as `RateLimiter.hit` with
       * `rateLimitSubject`), in one statement: one round trip per Event API request
       * instead of two. Only a key that matches is counted. `alongside` adds the
       * request's own read to that statement (GET /perform-list: its preview), so
       * that request makes one round trip in all. `shape` is the key's shape when the
       * caller has read it already (the Event API's key check), so it is not read twice.
       */
      authorize: (token: Redacted.Redacted<string>, alongside?: Alongside, shape?: Shape) =>
        authorizeSpan(authorize(token, alongside, shape))
    }
  })
}) {}
