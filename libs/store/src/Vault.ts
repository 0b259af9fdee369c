/**
 * Secrets at rest (bridge credentials, webhook signing secrets): AES-256-GCM
 * envelope encryption.
 *
 * - A secret is sealed under a random 256-bit data key; the data key's id is
 *   stored beside the ciphertext. The additional data binds the ciphertext
 *   to its owner (for example account + tenant + connection + field) and to
 *   the key id: moved to another owner, or relabelled with another key id,
 *   it no longer decrypts.
 * - Data keys live in the database wrapped (AES-256-GCM) under MASTER_KEY.
 *   A replica unwraps a key the first time it meets its id and caches it, so
 *   ciphertexts sealed under a key created by another replica (after a
 *   rotation, say) decrypt with no restart.
 * - `rotate` creates a new active data key, re-seals every secret under it
 *   in batches and deletes the data keys nothing uses any more; replicas
 *   keep running throughout. A data key is wrapped under the current master
 *   key and every previous one configured, which is how MASTER_KEY itself
 *   changes without downtime (see `MasterKeys`).
 *
 * Sealing takes a share lock on the active key inside the caller's
 * transaction, and rotation switches the active key under an exclusive one:
 * once the switch commits, nothing can still be sealing under the old key,
 * so one re-sealing pass catches every secret.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Audit from "./Audit.js"
import { Context, Data, Effect, Either, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, createHmac, randomBytes, randomUUID } from "node:crypto"

/** Length of a master key and of a data key, in bytes (AES-256). */
export const KEY_BYTES = 32

const IV_BYTES = 12
const TAG_BYTES = 16
/** First byte of every sealed value: the layout below, so it can change later. */
const FORMAT_V1 = 1
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES

/** A master key and its public id (a fingerprint; safe to store and to log). */
export interface MasterKey {
  readonly id: string
  readonly bytes: Redacted.Redacted<Uint8Array>
}

/**
 * The master keys of a process: `current` (MASTER_KEY) wraps new data keys
 * and is preferred for unwrapping; `previous` (MASTER_KEY_PREVIOUS) only
 * serve while the master key changes: data keys created meanwhile are
 * wrapped under them too, so replicas still on the old key keep working.
 */
export interface MasterKeys {
  readonly current: MasterKey
  readonly previous: ReadonlyArray<MasterKey>
}

const fingerprint = (bytes: Uint8Array): string =>
  createHmac("sha256", bytes).update("crm-relay master key id v1").digest("hex").slice(0, 16)

/**
 * Reads a master key: 32 bytes in base64 (standard or URL-safe). The error
 * names `name` and says what is expected, never the value.
 */
export const parseMasterKey = (text: Redacted.Redacted<string>, name = "MASTER_KEY"): Either.Either<MasterKey, string> => {
  const trimmed = Redacted.value(text).trim()
  const bytes = /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed) ? Buffer.from(trimmed, "base64") : Buffer.alloc(0)
  if (bytes.length !== KEY_BYTES) {
    return Either.left(`${name} must be ${KEY_BYTES} random bytes in base64 (for example the output of \`openssl rand -base64 32\`).`)
  }
  return Either.right({ id: fingerprint(bytes), bytes: Redacted.make(new Uint8Array(bytes)) })
}

/** A new random master key, as the base64 text MASTER_KEY holds. */
export const generateMasterKey = (): Redacted.Redacted<string> => Redacted.make(randomBytes(KEY_BYTES).toString("base64"))

/** Random master keys (tests). */
export const randomMasterKeys = (): MasterKeys => ({
  current: Either.getOrThrow(parseMasterKey(generateMasterKey())),
  previous: []
})

/** A sealed secret: the data key's id and `FORMAT | iv | tag | ciphertext`. */
export interface Sealed {
  readonly keyId: string
  readonly ciphertext: Uint8Array
}

/** Why a secret could not be opened; `message` names ids only, never secret material. */
export type VaultFailure =
  /** Authentication failed: wrong key, tampered bytes, or another owner's ciphertext. */
  | "decrypt_failed"
  /** No data key has this id (deleted by a rotation, or a forged id). */
  | "unknown_key"
  /** The data key exists but is wrapped under none of the configured master keys. */
  | "wrong_master_key"
  /** No stored secret has this id. */
  | "not_found"

/** A secret could not be opened or sealed. */
export class VaultError extends Data.TaggedError("VaultError")<{
  readonly reason: VaultFailure
  readonly message: string
}> {}

/** What a rotation did. */
export interface RotationReport {
  /** The new active data key. */
  readonly keyId: string
  /** Secrets re-sealed under it. */
  readonly resealed: number
  /** Secrets that could not be opened (tampered or foreign); they keep their old key. */
  readonly undecryptable: ReadonlyArray<string>
  /** Data keys deleted because no secret uses them any more. */
  readonly deletedKeys: ReadonlyArray<string>
}

/** Re-sealed per transaction during a rotation. */
export const ROTATION_BATCH = 500

/** Sealing and opening secrets, and rotating the data keys. */
/** How `rotate` runs: secrets per transaction, and who hears its progress. */
export interface RotationOptions {
  readonly batchSize?: number
  readonly onProgress?: (done: number, total: number) => Effect.Effect<void>
}

export class Vault extends Context.Tag("@crm-relay/store/Vault")<Vault, {
  /** The current master key's public id. */
  readonly masterKeyId: string
  /**
   * Seals `plaintext` bound to `aad` under the active data key (created on
   * first use). Run it in the transaction that stores the result.
   */
  readonly encrypt: (plaintext: Redacted.Redacted<string>, aad: string) => Effect.Effect<Sealed>
  /** Opens a sealed secret; fails unless it was sealed with exactly this `aad`. */
  readonly decrypt: (sealed: Sealed, aad: string) => Effect.Effect<Redacted.Redacted<string>, VaultError>
  /** Seals `plaintext` into `vault_secrets` and returns the row id (run it in the owner's transaction). */
  readonly store: (plaintext: Redacted.Redacted<string>, aad: string) => Effect.Effect<string>
  /**
   * Opens the stored secret `id`: `read` when the owner's query already
   * fetched its row, else read now. A rotation may re-seal the row and
   * delete its old key meanwhile: then the row is read again.
   */
  readonly open: (id: string, aad: string, read?: Sealed) => Effect.Effect<Redacted.Redacted<string>, VaultError>
  /** Deletes the stored secret `id` (after its owner stopped referencing it). */
  readonly remove: (id: string) => Effect.Effect<void>
  /**
   * New active data key, every secret re-sealed under it, unused keys
   * deleted. Safe to re-run. `onProgress` hears how many of the secrets to
   * re-seal are done: once before the first batch, then after each.
   */
  readonly rotate: (options?: RotationOptions) => Effect.Effect<RotationReport, VaultError>
  /** Fails when the stored data keys exist but none opens under the configured master keys. */
  readonly check: Effect.Effect<void, VaultError>
}>() {}

// ---------------------------------------------------------------------------
// AES-256-GCM
// ---------------------------------------------------------------------------

const seal = (key: Uint8Array, plaintext: Uint8Array, aad: string): Buffer => {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv("aes-256-gcm", key, iv)
  cipher.setAAD(Buffer.from(aad, "utf8"))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([Buffer.of(FORMAT_V1), iv, cipher.getAuthTag(), body])
}

/** The plaintext, or none when the bytes do not authenticate under `key` and `aad`. */
const unseal = (key: Uint8Array, sealed: Uint8Array, aad: string): Option.Option<Buffer> => {
  if (sealed.length < HEADER_BYTES || sealed[0] !== FORMAT_V1) return Option.none()
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength)
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES })
    decipher.setAAD(Buffer.from(aad, "utf8"))
    decipher.setAuthTag(bytes.subarray(1 + IV_BYTES, HEADER_BYTES))
    return Option.some(Buffer.concat([decipher.update(bytes.subarray(HEADER_BYTES)), decipher.final()]))
  } catch {
    return Option.none()
  }
}

// Domain-separated additional data: a secret is bound to its key id and owner, a wrap to its key and master key.
const secretAad = (keyId: string, aad: string) => `crm-relay/vault/secret/v1\u0000${keyId}\u0000${aad}`
const wrapAad = (keyId: string, masterKeyId: string) => `crm-relay/vault/data-key/v1\u0000${keyId}\u0000${masterKeyId}`

const failure = (reason: VaultFailure, message: string) => new VaultError({ reason, message })
const decryptFailed = (keyId: string) =>
  failure(
    "decrypt_failed",
    `A secret sealed under data key ${keyId} did not authenticate: it was altered, or it belongs to another owner.`
  )

interface WrapRow {
  readonly master_key_id: string
  readonly wrapped: Uint8Array
}
interface SecretRow {
  readonly id: string
  readonly key_id: string
  readonly aad: string
  readonly ciphertext: Uint8Array
}

/** Opens data key `keyId` from its `wraps` with the first of `masters` that has one. */
const unwrapWith = (
  masters: ReadonlyArray<MasterKey>,
  keyId: string,
  wraps: ReadonlyArray<WrapRow>
): Either.Either<Uint8Array, VaultError> => {
  const masterIds = masters.map((m) => m.id)
  if (wraps.length === 0) return Either.left(failure("unknown_key", `No data key ${keyId} exists.`))
  for (const master of masters) {
    const row = wraps.find((w) => w.master_key_id === master.id)
    if (row === undefined) continue
    const opened = unseal(Redacted.value(master.bytes), row.wrapped, wrapAad(keyId, master.id))
    if (Option.isSome(opened) && opened.value.length === KEY_BYTES) return Either.right(new Uint8Array(opened.value))
    return Either.left(failure("decrypt_failed", `The wrap of data key ${keyId} did not authenticate under master key ${master.id}.`))
  }
  return Either.left(
    failure(
      "wrong_master_key",
      `Data key ${keyId} is wrapped under master key(s) ${wraps.map((w) => w.master_key_id).join(", ")}, ` +
        `not under the configured ${masterIds.join(", ")}: set MASTER_KEY (or MASTER_KEY_PREVIOUS) to the key it was created with.`
    )
  )
}

/**
 * Whether `keys` open `secret` through the wraps of its data key, as rows of
 * `vault_key_wraps` and `vault_secrets`: a backup is checked with this
 * before it is restored, so a wrong MASTER_KEY is refused before any write.
 */
export const opens = (
  keys: MasterKeys,
  wraps: ReadonlyArray<WrapRow & { readonly key_id: string }>,
  secret: Pick<SecretRow, "key_id" | "aad" | "ciphertext">
): Either.Either<void, VaultError> =>
  Either.flatMap(
    unwrapWith([keys.current, ...keys.previous], secret.key_id, wraps.filter((w) => w.key_id === secret.key_id)),
    (key) =>
      Option.isSome(unseal(key, secret.ciphertext, secretAad(secret.key_id, secret.aad)))
        ? Either.void
        : Either.left(decryptFailed(secret.key_id))
  )

/** The Vault over the database of the context, with these master keys. */
export const layer = (keys: MasterKeys): Layer.Layer<Vault, never, SqlClient.SqlClient> =>
  Layer.effect(Vault, make(keys))

/** A Vault with fresh random master keys (tests that need no second process). */
export const layerTest: Layer.Layer<Vault, never, SqlClient.SqlClient> = Layer.suspend(() => layer(randomMasterKeys()))

/** Builds the Vault over the `SqlClient` in context. */
export const make = (keys: MasterKeys) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const masters = [keys.current, ...keys.previous]
    // A transaction whose database failure is a defect, like every statement here.
    const transaction = <A, R>(effect: Effect.Effect<A, never, R>) => sql.withTransaction(effect).pipe(Effect.orDie)
    // Unwrapped data keys by id; there are only ever a few.
    const dataKeys = new Map<string, Uint8Array>()

    const wrap = (keyId: string, dataKey: Uint8Array) =>
      masters.map((master) => ({
        master_key_id: master.id,
        wrapped: seal(Redacted.value(master.bytes), dataKey, wrapAad(keyId, master.id)).toString("base64")
      }))

    const unwrap = (keyId: string, wraps: ReadonlyArray<WrapRow>) => unwrapWith(masters, keyId, wraps)

    /** The data keys `ids`, from the cache or unwrapped from one query. */
    const dataKeysFor = (ids: ReadonlyArray<string>): Effect.Effect<Map<string, Either.Either<Uint8Array, VaultError>>> =>
      Effect.gen(function*() {
        const result = new Map<string, Either.Either<Uint8Array, VaultError>>()
        const missing = [...new Set(ids)].filter((id) => {
          const cached = dataKeys.get(id)
          if (cached !== undefined) result.set(id, Either.right(cached))
          return cached === undefined
        })
        if (missing.length === 0) return result
        const rows = yield* sql<WrapRow & { readonly key_id: string }>`
          SELECT key_id, master_key_id, wrapped FROM vault_key_wraps WHERE key_id IN ${sql.in(missing)}`.pipe(Effect.orDie)
        for (const id of missing) {
          const opened = unwrap(id, rows.filter((r) => r.key_id === id))
          if (Either.isRight(opened)) dataKeys.set(id, opened.right)
          result.set(id, opened)
        }
        return result
      })

    const dataKey = (id: string) =>
      Effect.flatMap(dataKeysFor([id]), (found) => found.get(id) ?? Either.left(failure("unknown_key", `No data key ${id} exists.`)))

    /** Creates the active data key, wrapped under every configured master key, unless there is one; true when created. */
    const createActiveKey =
      Effect.gen(function*() {
        const id = randomUUID()
        const material = new Uint8Array(randomBytes(KEY_BYTES))
        const wraps = wrap(id, material)
        const inserted = yield* sql<{ id: string }>`
          WITH key AS (
            INSERT INTO vault_keys (id, state) VALUES (${id}, 'active')
            ON CONFLICT (state) WHERE state = 'active' DO NOTHING
            RETURNING id
          )
          INSERT INTO vault_key_wraps (key_id, master_key_id, wrapped)
          SELECT key.id, w.master_key_id, decode(w.wrapped, 'base64')
          FROM key, jsonb_to_recordset(${JSON.stringify(wraps)}::jsonb) AS w(master_key_id text, wrapped text)
          RETURNING key_id AS id`.pipe(Effect.orDie)
        if (inserted.length > 0) dataKeys.set(id, material)
        return inserted.length > 0
      })

    /** The active key's id, share-locked for the caller's transaction; created when there is none. */
    const activeKeyId: Effect.Effect<string> = Effect.gen(function*() {
      for (let attempt = 0; attempt < 3; attempt++) {
        const rows = yield* sql<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active' FOR SHARE`.pipe(Effect.orDie)
        if (rows[0] !== undefined) return rows[0].id
        // None yet, or a rotation switched it while we waited: create one unless another replica just did.
        yield* createActiveKey
      }
      return yield* Effect.dieMessage("Vault: no active data key after three attempts")
    })

    const encrypt = (plaintext: Redacted.Redacted<string>, aad: string) =>
      Effect.gen(function*() {
        const keyId = yield* activeKeyId
        const key = yield* Effect.orDie(dataKey(keyId))
        const bytes = Buffer.from(Redacted.value(plaintext), "utf8")
        const ciphertext = seal(key, bytes, secretAad(keyId, aad))
        bytes.fill(0)
        return { keyId, ciphertext: new Uint8Array(ciphertext) } satisfies Sealed
      }).pipe(Effect.withSpan("Vault.encrypt"))

    const decrypt = (sealed: Sealed, aad: string) =>
      Effect.flatMap(dataKey(sealed.keyId), (key) =>
        Option.match(unseal(key, sealed.ciphertext, secretAad(sealed.keyId, aad)), {
          onNone: () => Effect.fail(decryptFailed(sealed.keyId)),
          onSome: (bytes) => {
            const text = bytes.toString("utf8")
            bytes.fill(0)
            return Effect.succeed(Redacted.make(text))
          }
        })).pipe(Effect.withSpan("Vault.decrypt"))

    const readSecret = (id: string) =>
      Effect.flatMap(
        sql<{ key_id: string; ciphertext: Uint8Array }>`SELECT key_id, ciphertext FROM vault_secrets WHERE id = ${id}`.pipe(
          Effect.orDie
        ),
        (rows) =>
          rows[0] === undefined
            ? Effect.fail(failure("not_found", `No stored secret ${id} exists.`))
            : Effect.succeed<Sealed>({ keyId: rows[0].key_id, ciphertext: rows[0].ciphertext })
      )

    const rekeyed = (error: VaultError) => error.reason === "unknown_key"
    const readAndDecrypt = (id: string, aad: string) => Effect.flatMap(readSecret(id), (sealed) => decrypt(sealed, aad))
    // A rotation may re-seal the row and delete its old key between a read and the key lookup: read it again once.
    const openFresh = (id: string, aad: string) => Effect.catchIf(readAndDecrypt(id, aad), rekeyed, () => readAndDecrypt(id, aad))

    const open = (id: string, aad: string, read?: Sealed) =>
      (read === undefined ? openFresh(id, aad) : Effect.catchIf(decrypt(read, aad), rekeyed, () => openFresh(id, aad))).pipe(
        Effect.withSpan("Vault.open")
      )

    const store = (plaintext: Redacted.Redacted<string>, aad: string) =>
      Effect.flatMap(encrypt(plaintext, aad), (sealed) =>
        sql<{ id: string }>`
          INSERT INTO vault_secrets (key_id, aad, ciphertext)
          VALUES (${sealed.keyId}, ${aad}, ${sealed.ciphertext})
          RETURNING id`.pipe(Effect.orDie, Effect.map((rows) => rows[0]!.id))).pipe(Effect.withSpan("Vault.store"))

    const remove = (id: string) =>
      sql`DELETE FROM vault_secrets WHERE id = ${id}`.pipe(Effect.orDie, Effect.asVoid, Effect.withSpan("Vault.remove"))

    /** One batch: re-seals up to `size` secrets after `cursor` that are not under the active key. */
    const resealBatch = (cursor: string, size: number) =>
      transaction(Effect.gen(function*() {
        const keyId = yield* activeKeyId
        const key = yield* Effect.orDie(dataKey(keyId))
        const rows = yield* sql<SecretRow>`
          SELECT id, key_id, aad, ciphertext FROM vault_secrets
          WHERE key_id <> ${keyId} AND id > ${cursor}
          ORDER BY id LIMIT ${size} FOR UPDATE`.pipe(Effect.orDie)
        const keysById = yield* dataKeysFor(rows.map((r) => r.key_id))
        const resealed: Array<{ id: string; ciphertext: string }> = []
        const undecryptable: Array<string> = []
        for (const row of rows) {
          const old = keysById.get(row.key_id)
          const plaintext = old !== undefined && Either.isRight(old)
            ? unseal(old.right, row.ciphertext, secretAad(row.key_id, row.aad))
            : Option.none()
          if (Option.isNone(plaintext)) {
            undecryptable.push(row.id)
            continue
          }
          resealed.push({ id: row.id, ciphertext: seal(key, plaintext.value, secretAad(keyId, row.aad)).toString("base64") })
          plaintext.value.fill(0)
        }
        if (resealed.length > 0) {
          yield* sql`
            UPDATE vault_secrets AS s
            SET key_id = ${keyId}, ciphertext = decode(v.ciphertext, 'base64'), updated_at = now()
            FROM jsonb_to_recordset(${JSON.stringify(resealed)}::jsonb) AS v(id uuid, ciphertext text)
            WHERE s.id = v.id`.pipe(Effect.orDie)
        }
        return { last: rows.at(-1)?.id, resealed: resealed.length, undecryptable }
      }))

    const rotate = (options: RotationOptions = {}) =>
      Effect.gen(function*() {
        const size = Math.max(1, options.batchSize ?? ROTATION_BATCH)
        // Refuse before changing anything if a key in use cannot be opened with the configured master keys.
        const inUse = yield* sql<{ key_id: string }>`SELECT DISTINCT key_id FROM vault_secrets`.pipe(Effect.orDie)
        const opened = yield* dataKeysFor(inUse.map((r) => r.key_id))
        for (const result of opened.values()) {
          if (Either.isLeft(result)) return yield* result.left
        }

        // Switch the active key. The exclusive row lock waits for transactions still sealing under the old one.
        const keyId = yield* transaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.vault_rotation'))`.pipe(Effect.orDie)
          yield* sql`UPDATE vault_keys SET state = 'retired', retired_at = now() WHERE state = 'active'`.pipe(Effect.orDie)
          if (!(yield* createActiveKey)) return yield* Effect.dieMessage("Vault.rotate: an active key appeared under the rotation lock")
          const rows = yield* sql<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`.pipe(Effect.orDie)
          return rows[0]!.id
        }))
        yield* Effect.logInfo("Vault rotation: new active data key").pipe(Effect.annotateLogs({ key_id: keyId }))

        const onProgress = options.onProgress ?? (() => Effect.void)
        const [pending] = yield* sql<{ n: number }>`
          SELECT count(*)::int4 AS n FROM vault_secrets WHERE key_id <> ${keyId}`.pipe(Effect.orDie)
        // Secrets stored meanwhile are sealed under the new key already: the total does not grow.
        const total = pending?.n ?? 0
        yield* onProgress(0, total)
        let cursor = "00000000-0000-0000-0000-000000000000"
        let resealed = 0
        const undecryptable: Array<string> = []
        for (;;) {
          const batch = yield* resealBatch(cursor, size)
          resealed += batch.resealed
          undecryptable.push(...batch.undecryptable)
          if (batch.last === undefined) break
          cursor = batch.last
          yield* onProgress(Math.min(total, resealed + undecryptable.length), total)
        }
        // Secrets removed meanwhile need nothing more: the work is over.
        if (total > 0 && resealed + undecryptable.length < total) yield* onProgress(total, total)

        const deleted = yield* sql<{ id: string }>`
          DELETE FROM vault_keys AS k
          WHERE k.state = 'retired' AND NOT EXISTS (SELECT 1 FROM vault_secrets AS s WHERE s.key_id = k.id)
          RETURNING k.id`.pipe(Effect.orDie)
        for (const { id } of deleted) dataKeys.delete(id)
        if (undecryptable.length > 0) {
          yield* Effect.logWarning("Vault rotation: secrets that do not authenticate kept their old key").pipe(
            Effect.annotateLogs({ secret_ids: undecryptable.join(",") })
          )
        }
        const report: RotationReport = { keyId, resealed, undecryptable, deletedKeys: deleted.map((r) => r.id) }
        yield* Effect.logInfo("Vault rotation finished").pipe(
          Effect.annotateLogs({ key_id: keyId, resealed, deleted_keys: report.deletedKeys.length })
        )
        yield* Audit.record("master_key.rotated", { key_id: keyId, resealed })
        return report
      }).pipe(Effect.withSpan("Vault.rotate"))

    const check = Effect.gen(function*() {
      const rows = yield* sql<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`.pipe(Effect.orDie)
      if (rows[0] === undefined) return
      yield* dataKey(rows[0].id)
    })

    return Vault.of({
      masterKeyId: keys.current.id,
      encrypt,
      decrypt,
      store,
      open,
      remove,
      rotate,
      check
    })
  })
