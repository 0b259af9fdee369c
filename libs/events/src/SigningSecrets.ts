/**
 * Webhook signing secrets: one Standard Webhooks secret per account
 * (`whsec_` + base64 of 32 random bytes), created on first use and stored
 * sealed by the Vault, bound to the account. Replicas racing to create it
 * agree on one (the first insert wins; the others drop theirs and read it).
 * A secret never changes once created, so each replica keeps the ones it
 * has read in memory.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Vault } from "@crm-relay/store"
import { isUuid } from "@crm-relay/store/Ids"
import { Effect, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { AccountNotFound } from "./IntegrationKeys.js"

/** Every signing secret starts with this (the Standard Webhooks convention). */
export const SECRET_PREFIX = "whsec_"

/** Random bytes behind a secret. */
export const SECRET_BYTES = 32

/** How many secrets a replica keeps in memory. */
export const MAX_CACHED = 10_000

/** The additional data binding an account's sealed secret to that account. */
export const bindingOf = (accountId: string): string => JSON.stringify(["crm-relay/signing-secret/v1", accountId])

interface Row {
  readonly secret_id: string | null
  readonly key_id: string | null
  readonly ciphertext: Uint8Array | null
}

/** Reads (and on first use creates) each account's webhook signing secret. */
export class SigningSecrets extends Effect.Service<SigningSecrets>()("@crm-relay/events/SigningSecrets", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vault = yield* Vault.Vault
    const cache = new Map<string, Redacted.Redacted<string>>()

    const remember = (accountId: string, secret: Redacted.Redacted<string>) => {
      cache.set(accountId, secret)
      if (cache.size > MAX_CACHED) {
        const oldest = cache.keys().next()
        if (oldest.done !== true) cache.delete(oldest.value)
      }
      return secret
    }

    /** The stored secret (none when the account has none yet), or AccountNotFound. */
    const read = (accountId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<Row>`
          SELECT s.secret_id, v.key_id, v.ciphertext
          FROM accounts AS a
          LEFT JOIN signing_secrets AS s ON s.account_id = a.id
          LEFT JOIN vault_secrets AS v ON v.id = s.secret_id
          WHERE a.id = ${accountId}`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* new AccountNotFound({ accountId })
        if (row.secret_id === null || row.key_id === null || row.ciphertext === null) return Option.none()
        const sealed = { keyId: row.key_id, ciphertext: row.ciphertext }
        return Option.some(yield* Effect.orDie(vault.open(row.secret_id, bindingOf(accountId), sealed)))
      })

    /** Creates a secret unless another replica just did; true when ours was stored. */
    const create = (accountId: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const secret = Redacted.make(`${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString("base64")}`)
        const secretId = yield* vault.store(secret, bindingOf(accountId))
        const inserted = yield* sql`
          INSERT INTO signing_secrets (account_id, secret_id) VALUES (${accountId}, ${secretId})
          ON CONFLICT (account_id) DO NOTHING
          RETURNING account_id`.pipe(Effect.orDie)
        if (inserted.length === 0) yield* vault.remove(secretId)
      })).pipe(Effect.orDie)

    return {
      /** The account's `whsec_…` secret, created on first use. */
      get: Effect.fn("SigningSecrets.get")(function*(accountId: string) {
        const cached = cache.get(accountId)
        if (cached !== undefined) return cached
        if (!isUuid(accountId)) return yield* new AccountNotFound({ accountId })
        const stored = yield* read(accountId)
        if (Option.isSome(stored)) return remember(accountId, stored.value)
        yield* create(accountId)
        const created = yield* read(accountId)
        if (Option.isNone(created)) return yield* Effect.dieMessage(`The signing secret of account ${accountId} vanished after it was created`)
        return remember(accountId, created.value)
      })
    }
  })
}) {}
