/**
 * Webhook signing secrets: one Standard Webhooks secret per account
 * (`whsec_` + base64 of 32 random bytes), created on first use and stored
 * sealed by the Vault, bound to the account. Replicas racing to create it
 * agree on one (the first insert wins; the others drop theirs and read it).
 *
 * Rotation (Standard Webhooks allows several signatures): a new secret
 * becomes current and the previous one keeps signing beside it until the
 * overlap ends, so a receiver can switch secrets at any moment of the
 * overlap without rejecting a delivery. Each replica keeps what it read in
 * memory for at most `CACHE_TTL_MS`, so a rotation made on another replica
 * reaches every delivery within that time. A replica reads (or creates) an
 * account's secret once however many deliveries ask at the same moment: the
 * others wait for that read.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Vault } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Cause, Clock, Deferred, Duration, Effect, FiberId, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { AccountNotFound } from "./IntegrationKeys.js"

/** Every signing secret starts with this (the Standard Webhooks convention). */
export const SECRET_PREFIX = "whsec_"

/** Random bytes behind a secret. */
export const SECRET_BYTES = 32

/** How many secrets a replica keeps in memory. */
export const MAX_CACHED = 10_000

/** How long a replica trusts what it read (a rotation elsewhere reaches it within this). */
export const CACHE_TTL_MS = 10_000

/** The overlap of a rotation unless the caller names another: a day, as receivers roll out the new secret. */
export const DEFAULT_OVERLAP = Duration.hours(24)

/** What signs an account's deliveries now: the current secret and, during a rotation's overlap, the previous one. */
export interface SigningSet {
  readonly current: Redacted.Redacted<string>
  readonly previous: Option.Option<Redacted.Redacted<string>>
  /** When the previous secret stops signing (none when there is no overlap). */
  readonly previousUntil: Option.Option<Date>
  readonly createdAt: Date
  readonly rotatedAt: Option.Option<Date>
}

/** The additional data binding an account's sealed secret to that account. */
export const bindingOf = (accountId: string): string => JSON.stringify(["crm-relay/signing-secret/v1", accountId])

interface Row {
  readonly secret_id: string | null
  readonly key_id: string | null
  readonly ciphertext: Uint8Array | null
  readonly previous_secret_id: string | null
  readonly previous_key_id: string | null
  readonly previous_ciphertext: Uint8Array | null
  readonly previous_until: Date | null
  readonly created_at: Date | null
  readonly rotated_at: Date | null
}

const newSecret = () => Redacted.make(`${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString("base64")}`)

/** Reads (and on first use creates) each account's webhook signing secret, and rotates it. */
export class SigningSecrets extends Effect.Service<SigningSecrets>()("@crm-relay/events/SigningSecrets", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vault = yield* Vault.Vault
    const cache = new Map<string, { readonly set: SigningSet; readonly readAt: number }>()
    // The read under way for an account: the deliveries that ask meanwhile wait for it.
    const reading = new Map<string, Deferred.Deferred<SigningSet, AccountNotFound>>()
    // Counts this replica's rotations: a read that began before one is not remembered.
    let rotations = 0

    const remember = (accountId: string, set: SigningSet, now: number, rotationsAtRead: number) => {
      if (rotationsAtRead !== rotations) return set
      cache.delete(accountId)
      cache.set(accountId, { set, readAt: now })
      if (cache.size > MAX_CACHED) {
        const oldest = cache.keys().next()
        if (oldest.done !== true) cache.delete(oldest.value)
      }
      return set
    }

    /** The stored set (none when the account has none yet), or AccountNotFound. */
    const read = (accountId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<Row>`
          SELECT s.secret_id, v.key_id, v.ciphertext, s.previous_secret_id, p.key_id AS previous_key_id,
                 p.ciphertext AS previous_ciphertext, s.previous_until, s.created_at, s.rotated_at
          FROM accounts AS a
          LEFT JOIN signing_secrets AS s ON s.account_id = a.id
          LEFT JOIN vault_secrets AS v ON v.id = s.secret_id
          LEFT JOIN vault_secrets AS p ON p.id = s.previous_secret_id
          WHERE a.id = ${accountId}`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* new AccountNotFound({ accountId })
        if (row.secret_id === null || row.key_id === null || row.ciphertext === null || row.created_at === null) {
          return Option.none<SigningSet>()
        }
        const current = yield* Effect.orDie(
          vault.open(row.secret_id, bindingOf(accountId), { keyId: row.key_id, ciphertext: row.ciphertext })
        )
        const now = yield* Clock.currentTimeMillis
        const overlapping = row.previous_secret_id !== null && row.previous_key_id !== null &&
          row.previous_ciphertext !== null && row.previous_until !== null && row.previous_until.getTime() > now
        const previous = overlapping
          ? Option.some(yield* Effect.orDie(vault.open(row.previous_secret_id!, bindingOf(accountId), {
            keyId: row.previous_key_id!,
            ciphertext: row.previous_ciphertext!
          })))
          : Option.none<Redacted.Redacted<string>>()
        return Option.some<SigningSet>({
          current,
          previous,
          previousUntil: overlapping ? Option.some(row.previous_until!) : Option.none(),
          createdAt: row.created_at,
          rotatedAt: Option.fromNullable(row.rotated_at)
        })
      })

    /** Creates a secret unless another replica just did; true when ours was stored. */
    const create = (accountId: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const secretId = yield* vault.store(newSecret(), bindingOf(accountId))
        const inserted = yield* sql`
          INSERT INTO signing_secrets (account_id, secret_id) VALUES (${accountId}, ${secretId})
          ON CONFLICT (account_id) DO NOTHING
          RETURNING account_id`.pipe(Effect.orDie)
        if (inserted.length === 0) yield* vault.remove(secretId)
      })).pipe(Effect.orDie)

    // What the cache holds for `accountId` at `now`, if it may still be trusted.
    const fromCache = (accountId: string, now: number): SigningSet | undefined => {
      const cached = cache.get(accountId)
      if (cached === undefined || now - cached.readAt >= CACHE_TTL_MS) return undefined
      // An overlap that ended since the read is dropped at once, without a read.
      const ended = Option.exists(cached.set.previousUntil, (until) => until.getTime() <= now)
      return ended ? { ...cached.set, previous: Option.none(), previousUntil: Option.none() } : cached.set
    }

    const readOrCreate = Effect.fn("SigningSecrets.signing")(function*(accountId: string) {
      const now = yield* Clock.currentTimeMillis
      const rotationsAtRead = rotations
      const cached = fromCache(accountId, now)
      if (cached !== undefined) return cached
      if (!isUuid(accountId)) return yield* new AccountNotFound({ accountId })
      const stored = yield* read(accountId)
      if (Option.isSome(stored)) return remember(accountId, stored.value, now, rotationsAtRead)
      yield* create(accountId)
      const created = yield* read(accountId)
      if (Option.isNone(created)) return yield* Effect.dieMessage(`The signing secret of account ${accountId} vanished after it was created`)
      return remember(accountId, created.value, now, rotationsAtRead)
    })

    // One read per account at a time: a cold cache (a new account, or every `CACHE_TTL_MS`) meets a whole
    // claim of deliveries at once, and each would read, or even create and drop, a secret of its own.
    // A waiter whose reader was interrupted (its delivery stopped) reads for itself.
    const readOnce = (accountId: string): Effect.Effect<SigningSet, AccountNotFound> =>
      Effect.suspend(() => {
        const under = reading.get(accountId)
        if (under !== undefined) {
          return Effect.catchAllCause(
            Deferred.await(under),
            (cause) => Cause.isInterruptedOnly(cause) ? readOnce(accountId) : Effect.failCause(cause)
          )
        }
        const done = Deferred.unsafeMake<SigningSet, AccountNotFound>(FiberId.none)
        reading.set(accountId, done)
        return Effect.onExit(readOrCreate(accountId), (exit) => {
          if (reading.get(accountId) === done) reading.delete(accountId)
          return Deferred.done(done, exit)
        })
      })

    // Every delivery asks: a cached answer costs no span (a span per delivery is a good part of its CPU).
    const signing = (accountId: string): Effect.Effect<SigningSet, AccountNotFound> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const cached = fromCache(accountId, now)
        return cached === undefined ? readOnce(accountId) : Effect.succeed(cached)
      })

    return {
      /** The account's current `whsec_…` secret, created on first use. */
      get: (accountId: string) => Effect.map(signing(accountId), (set) => set.current),

      /** The current secret and, during a rotation's overlap, the previous one: what signs a delivery now. */
      signing,

      /**
       * Replaces the account's secret with a new one; the replaced secret keeps
       * signing beside it for `overlap` (zero: it stops at once). A rotation during
       * an overlap ends that overlap: the secret before the previous one is removed.
       */
      rotate: Effect.fn("SigningSecrets.rotate")(function*(accountId: string, overlap: Duration.Duration = DEFAULT_OVERLAP) {
        yield* signing(accountId)
        const now = yield* Clock.currentTimeMillis
        const until = new Date(now + Duration.toMillis(overlap))
        yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<{ secret_id: string; previous_secret_id: string | null }>`
            SELECT secret_id, previous_secret_id FROM signing_secrets WHERE account_id = ${accountId} FOR UPDATE`
          const row = rows[0]
          if (row === undefined) return yield* Effect.dieMessage(`The signing secret of account ${accountId} vanished before its rotation`)
          const secretId = yield* vault.store(newSecret(), bindingOf(accountId))
          yield* sql`UPDATE signing_secrets SET secret_id = ${secretId}, previous_secret_id = ${row.secret_id},
                       previous_until = ${until}, rotated_at = ${new Date(now)}
                     WHERE account_id = ${accountId}`
          if (row.previous_secret_id !== null) yield* vault.remove(row.previous_secret_id)
        })).pipe(Effect.orDie)
        // Reads under way began before the rotation: their answer is not kept, and the next ask reads anew.
        rotations++
        cache.delete(accountId)
        reading.delete(accountId)
        yield* Audit.record("signing_secret.rotated", { account_id: accountId, overlap_seconds: Math.round(Duration.toSeconds(overlap)) })
        return yield* signing(accountId)
      })
    }
  })
}) {}
