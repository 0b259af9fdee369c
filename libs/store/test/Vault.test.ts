import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Either, Exit, Layer, Logger, LogLevel, Option, Redacted, type Scope } from "effect"
import * as Database from "../src/Database.js"
import * as TestDatabase from "../src/TestDatabase.js"
import * as Vault from "../src/Vault.js"

const keys = (current: Vault.MasterKey, previous: ReadonlyArray<Vault.MasterKey> = []): Vault.MasterKeys => ({ current, previous })
const masterKey = () => Either.getOrThrow(Vault.parseMasterKey(Vault.generateMasterKey()))

/** The owner binding the connection form uses: account + tenant + connection + field. */
const owner = (tenant: string, connection = "conn-1") => JSON.stringify(["connection", "acct-1", tenant, connection, "auth"])

/** A Vault instance of its own (its own key cache), as another replica would have, on the test database. */
const replica = (masterKeys: Vault.MasterKeys) =>
  Effect.gen(function*() {
    const db = yield* TestDatabase.TestDatabase
    // On PostgreSQL a replica has its own pool; PGlite has one session, shared.
    const sql = Option.isSome(db.url)
      ? Context.get(yield* Layer.build(Database.layerPostgres({ url: db.url.value, poolSize: 2 }).pipe(Layer.orDie)), SqlClient.SqlClient)
      : yield* SqlClient.SqlClient
    return yield* Vault.make(masterKeys).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  })

const failureOf = <A>(exit: Exit.Exit<A, Vault.VaultError>) =>
  Exit.match(exit, { onFailure: (cause) => cause, onSuccess: () => undefined })

const reasonOf = <A, R>(effect: Effect.Effect<A, Vault.VaultError, R>) =>
  Effect.map(Effect.either(effect), Either.match({ onLeft: (e) => e.reason, onRight: () => "opened" as const }))

/** Captures every log line (message and annotations) at every level while `effect` runs. */
const captureLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ annotations, cause, message }) => {
      lines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations), cause: String(cause) }))
    })
    const result = yield* effect.pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Logger.withMinimumLogLevel(LogLevel.All)
    )
    return { result, lines }
  })

describe("MASTER_KEY", () => {
  it("is 32 bytes of base64; anything else is refused with a sentence that never repeats the value", () => {
    const good = Vault.generateMasterKey()
    const parsed = Vault.parseMasterKey(good)
    expect(Either.isRight(parsed)).toBe(true)
    expect(Either.getOrThrow(parsed).id).toMatch(/^[0-9a-f]{16}$/)
    // The id is a fingerprint: stable for a key, different across keys, and not the key.
    expect(Either.getOrThrow(Vault.parseMasterKey(good)).id).toBe(Either.getOrThrow(parsed).id)
    expect(Either.getOrThrow(parsed).id).not.toBe(masterKey().id)
    expect(Redacted.value(good)).not.toContain(Either.getOrThrow(parsed).id)

    for (const bad of ["", "c2hvcnQ=", Buffer.alloc(31).toString("base64"), Buffer.alloc(33).toString("base64"), "not base64 at all!!"]) {
      const refused = Vault.parseMasterKey(Redacted.make(bad))
      expect(Either.isLeft(refused)).toBe(true)
      const message = Either.isLeft(refused) ? refused.left : ""
      expect(message).toContain("MASTER_KEY must be 32 random bytes in base64")
      if (bad !== "") expect(message).not.toContain(bad)
    }
    // URL-safe base64 is accepted too.
    expect(Either.isRight(Vault.parseMasterKey(Redacted.make(Buffer.alloc(32, 0xfb).toString("base64url"))))).toBe(true)
  })
})

/** Each test gets its own database: a database belongs to one MASTER_KEY, and these tests vary it. */
const withDatabase = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | TestDatabase.TestDatabase | Scope.Scope>) =>
  Effect.provide(effect, Layer.fresh(TestDatabase.layer))

describe("Vault", () => {
  it.scoped("round trip: a secret sealed for its owner opens for that owner, as stored or in memory", () =>
    withDatabase(Effect.gen(function*() {
      const vault = yield* Vault.make(keys(masterKey()))
      const secret = Redacted.make("key-1_visible~ASCII ünïcode")
      const sealed = yield* vault.encrypt(secret, owner("t-1"))
      expect(Redacted.value(yield* vault.decrypt(sealed, owner("t-1")))).toBe(Redacted.value(secret))
      // The ciphertext is not the plaintext and two seals of one secret differ (random IV).
      expect(Buffer.from(sealed.ciphertext).toString("utf8")).not.toContain("key-1")
      const again = yield* vault.encrypt(secret, owner("t-1"))
      expect(Buffer.from(again.ciphertext).equals(Buffer.from(sealed.ciphertext))).toBe(false)

      const id = yield* vault.store(secret, owner("t-1"))
      expect(Redacted.value(yield* vault.open(id, owner("t-1")))).toBe(Redacted.value(secret))
      yield* vault.remove(id)
      expect(yield* reasonOf(vault.open(id, owner("t-1")))).toBe("not_found")
    })))

  it.scoped("a key id is stored beside each ciphertext, and the data key itself only wrapped under the master key", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const master = masterKey()
      const vault = yield* Vault.make(keys(master))
      const id = yield* vault.store(Redacted.make("s3cret-value"), owner("t-1"))
      const [row] = yield* sql<{ key_id: string; ciphertext: Uint8Array }>`SELECT key_id, ciphertext FROM vault_secrets WHERE id = ${id}`
      const wraps = yield* sql<{ master_key_id: string; wrapped: Uint8Array }>`
        SELECT master_key_id, wrapped FROM vault_key_wraps WHERE key_id = ${row!.key_id}`
      expect(wraps.map((w) => w.master_key_id)).toContain(master.id)
      expect(Buffer.from(row!.ciphertext).toString("latin1")).not.toContain("s3cret")
    })))

  it.scoped("Credentials rule: tampering with the ciphertext, its tag, its key id or its additional data makes it fail to decrypt", () =>
    withDatabase(Effect.gen(function*() {
      const vault = yield* Vault.make(keys(masterKey()))
      const sealed = yield* vault.encrypt(Redacted.make("api-key-123"), owner("t-1"))
      const flip = (index: number) => {
        const bytes = new Uint8Array(sealed.ciphertext)
        bytes[index] = bytes[index]! ^ 0x01
        return { ...sealed, ciphertext: bytes }
      }
      // Layout: format byte, 12-byte IV, 16-byte tag, ciphertext.
      expect(yield* reasonOf(vault.decrypt(flip(sealed.ciphertext.length - 1), owner("t-1")))).toBe("decrypt_failed")
      expect(yield* reasonOf(vault.decrypt(flip(13), owner("t-1")))).toBe("decrypt_failed")
      expect(yield* reasonOf(vault.decrypt(flip(1), owner("t-1")))).toBe("decrypt_failed")
      expect(yield* reasonOf(vault.decrypt(flip(0), owner("t-1")))).toBe("decrypt_failed")
      expect(yield* reasonOf(vault.decrypt({ ...sealed, ciphertext: sealed.ciphertext.slice(0, 20) }, owner("t-1")))).toBe(
        "decrypt_failed"
      )
      // Another owner's additional data.
      expect(yield* reasonOf(vault.decrypt(sealed, owner("t-1", "conn-2")))).toBe("decrypt_failed")
      // A forged key id: unknown, or a real other key (created by a rotation).
      expect(yield* reasonOf(vault.decrypt({ ...sealed, keyId: "00000000-0000-4000-8000-000000000000" }, owner("t-1")))).toBe(
        "unknown_key"
      )
      yield* vault.rotate()
      const other = yield* vault.encrypt(Redacted.make("x"), owner("t-1"))
      expect(other.keyId).not.toBe(sealed.keyId)
      const relabelled = yield* vault.encrypt(Redacted.make("api-key-123"), owner("t-1"))
      expect(yield* reasonOf(vault.decrypt({ ...relabelled, keyId: sealed.keyId }, owner("t-1")))).toMatch(
        /^(decrypt_failed|unknown_key)$/
      )
      // The untouched value still opens.
      expect(Redacted.value(yield* vault.decrypt(relabelled, owner("t-1")))).toBe("api-key-123")
    })))

  it.scoped("Credentials rule: a ciphertext moved to another tenant fails to decrypt (additional data binds account, tenant and connection)", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const vault = yield* Vault.make(keys(masterKey()))
      const a = yield* vault.store(Redacted.make("tenant-a-key"), owner("t-a"))
      const b = yield* vault.store(Redacted.make("tenant-b-key"), owner("t-b"))
      // Copy tenant A's ciphertext (and its key id) over tenant B's row.
      yield* sql`UPDATE vault_secrets SET key_id = a.key_id, ciphertext = a.ciphertext
                 FROM vault_secrets AS a WHERE a.id = ${a} AND vault_secrets.id = ${b}`
      expect(yield* reasonOf(vault.open(b, owner("t-b")))).toBe("decrypt_failed")
      // Even relabelling the row's own additional data does not help: the binding is inside the ciphertext.
      yield* sql`UPDATE vault_secrets SET aad = ${owner("t-b")} WHERE id = ${b}`
      expect(yield* reasonOf(vault.open(b, owner("t-b")))).toBe("decrypt_failed")
      expect(Redacted.value(yield* vault.open(a, owner("t-a")))).toBe("tenant-a-key")
      yield* sql`DELETE FROM vault_secrets WHERE id = ${b}`
    })))

  it.scoped("another replica with the same MASTER_KEY opens what this one sealed; another MASTER_KEY is refused with a sentence saying what to set", () =>
    withDatabase(Effect.gen(function*() {
      const master = masterKey()
      const one = yield* Vault.make(keys(master))
      const id = yield* one.store(Redacted.make("shared"), owner("t-1"))
      const two = yield* replica(keys(master))
      expect(Redacted.value(yield* two.open(id, owner("t-1")))).toBe("shared")

      const stranger = yield* replica(keys(masterKey()))
      const exit = yield* Effect.exit(stranger.open(id, owner("t-1")))
      const error = failureOf(exit)
      expect(String(error)).toContain("MASTER_KEY")
      expect(yield* reasonOf(stranger.open(id, owner("t-1")))).toBe("wrong_master_key")
      expect(yield* reasonOf(stranger.check)).toBe("wrong_master_key")
      yield* one.check
    })))

  it.scoped("Credentials rule: master-key rotate re-seals every secret under a new key while replicas keep running; a replica decrypts the new key's ciphertexts with no restart", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const master = masterKey()
      const one = yield* Vault.make(keys(master))
      const secrets = Array.from({ length: 7 }, (_, i) => ({ plaintext: `secret-${i}`, aad: owner(`t-${i}`) }))
      const ids = yield* Effect.forEach(secrets, (s) => one.store(Redacted.make(s.plaintext), s.aad))
      // A running replica that has already opened them (and cached the old data key).
      const two = yield* replica(keys(master))
      for (const [i, id] of ids.entries()) expect(Redacted.value(yield* two.open(id, secrets[i]!.aad))).toBe(secrets[i]!.plaintext)
      const [before] = yield* sql<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`

      const heard: Array<[number, number]> = []
      const report = yield* one.rotate({ batchSize: 3, onProgress: (done, total) => Effect.sync(() => heard.push([done, total])) })
      // Long work shows progress: once before the first batch, then after each.
      expect(heard).toEqual([[0, 7], [3, 7], [6, 7], [7, 7]])
      expect(report.keyId).not.toBe(before!.id)
      expect(report.resealed).toBeGreaterThanOrEqual(7)
      expect(report.undecryptable).toEqual([])
      expect(report.deletedKeys).toContain(before!.id)
      // Every secret is now under the new key, and the old key is gone.
      const stale = yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM vault_secrets WHERE key_id <> ${report.keyId}`
      expect(stale[0]!.n).toBe(0)
      expect(yield* sql`SELECT id FROM vault_keys WHERE id = ${before!.id}`).toEqual([])

      // The replica never restarted: it opens the re-sealed secrets and seals new ones under the new key.
      for (const [i, id] of ids.entries()) expect(Redacted.value(yield* two.open(id, secrets[i]!.aad))).toBe(secrets[i]!.plaintext)
      const fresh = yield* two.encrypt(Redacted.make("after"), owner("t-9"))
      expect(fresh.keyId).toBe(report.keyId)
      expect(Redacted.value(yield* one.decrypt(fresh, owner("t-9")))).toBe("after")
    })))

  it.scoped("rotation is resumable: secrets left under retired keys by an interrupted rotation are re-sealed by the next run", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const vault = yield* Vault.make(keys(masterKey()))
      const first = yield* vault.store(Redacted.make("first"), owner("t-1"))
      // An interrupted rotation: the active key was switched, nothing re-sealed yet.
      yield* sql`UPDATE vault_keys SET state = 'retired', retired_at = now() WHERE state = 'active'`
      const second = yield* vault.store(Redacted.make("second"), owner("t-2"))
      const keyIds = yield* sql<{ key_id: string }>`SELECT key_id FROM vault_secrets WHERE id IN (${first}, ${second})`
      expect(new Set(keyIds.map((r) => r.key_id)).size).toBe(2)

      const report = yield* vault.rotate()
      expect(report.deletedKeys.length).toBeGreaterThanOrEqual(2)
      const after = yield* sql<{ key_id: string }>`SELECT DISTINCT key_id FROM vault_secrets`
      expect(after.map((r) => r.key_id)).toEqual([report.keyId])
      const retired = yield* sql<{ n: number }>`SELECT count(*)::int4 AS n FROM vault_keys WHERE state = 'retired'`
      expect(retired[0]!.n).toBe(0)
      expect(Redacted.value(yield* vault.open(first, owner("t-1")))).toBe("first")
      expect(Redacted.value(yield* vault.open(second, owner("t-2")))).toBe("second")
      // And again: idempotent in effect, a fresh key each time.
      const again = yield* vault.rotate()
      expect(again.keyId).not.toBe(report.keyId)
      expect(Redacted.value(yield* vault.open(first, owner("t-1")))).toBe("first")
    })))

  it.scoped("open with a row its owner read before a rotation (the row's key since deleted) reads the row again and opens it; a wrong owner still fails", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const vault = yield* Vault.make(keys(masterKey()))
      const id = yield* vault.store(Redacted.make("read before"), owner("t-1"))
      const [row] = yield* sql<{ key_id: string; ciphertext: Uint8Array }>`SELECT key_id, ciphertext FROM vault_secrets WHERE id = ${id}`
      const stale: Vault.Sealed = { keyId: row!.key_id, ciphertext: row!.ciphertext }
      expect(Redacted.value(yield* vault.open(id, owner("t-1"), stale))).toBe("read before")
      const report = yield* vault.rotate()
      expect(report.deletedKeys).toContain(stale.keyId)
      expect(yield* reasonOf(vault.decrypt(stale, owner("t-1")))).toBe("unknown_key")
      expect(Redacted.value(yield* vault.open(id, owner("t-1"), stale))).toBe("read before")
      expect(yield* reasonOf(vault.open(id, owner("t-2"), stale))).toBe("decrypt_failed")
    })))

  it.scoped("changing MASTER_KEY without downtime: rotate with the new key and MASTER_KEY_PREVIOUS keeps old replicas working; a second rotate drops the old key", () =>
    withDatabase(Effect.gen(function*() {
      const oldKey = masterKey()
      const newKey = masterKey()
      const oldReplica = yield* Vault.make(keys(oldKey))
      const id = yield* oldReplica.store(Redacted.make("through the change"), owner("t-1"))

      // The new key alone cannot open the old data keys: rotate refuses before changing anything.
      const alone = yield* replica(keys(newKey))
      const [activeBefore] = yield* (yield* SqlClient.SqlClient)<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`
      const refused = yield* Effect.either(alone.rotate())
      expect(Either.isLeft(refused) && refused.left.reason).toBe("wrong_master_key")
      const [activeAfter] = yield* (yield* SqlClient.SqlClient)<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`
      expect(activeAfter!.id).toBe(activeBefore!.id)

      // Step 1: rotate with MASTER_KEY=new, MASTER_KEY_PREVIOUS=old.
      const changing = yield* replica(keys(newKey, [oldKey]))
      yield* changing.rotate()
      // Replicas still on the old key keep working, and so do replicas already on the new one.
      expect(Redacted.value(yield* oldReplica.open(id, owner("t-1")))).toBe("through the change")
      const newReplica = yield* replica(keys(newKey))
      expect(Redacted.value(yield* newReplica.open(id, owner("t-1")))).toBe("through the change")
      yield* newReplica.check

      // Step 2 (every replica on the new key): rotate with the new key only; the old key opens nothing any more.
      yield* newReplica.rotate()
      expect(Redacted.value(yield* newReplica.open(id, owner("t-1")))).toBe("through the change")
      const lateOld = yield* replica(keys(oldKey))
      expect(yield* reasonOf(lateOld.open(id, owner("t-1")))).toBe("wrong_master_key")
    })))

  it.scoped("a tampered secret does not stop a rotation: it is reported by id, keeps its old key, and everything else moves", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const vault = yield* Vault.make(keys(masterKey()))
      yield* vault.rotate()
      const good = yield* vault.store(Redacted.make("good"), owner("t-1"))
      const bad = yield* vault.store(Redacted.make("bad"), owner("t-2"))
      yield* sql`UPDATE vault_secrets SET aad = ${owner("t-3")} WHERE id = ${bad}`
      const report = yield* vault.rotate()
      expect(report.undecryptable).toEqual([bad])
      expect(Redacted.value(yield* vault.open(good, owner("t-1")))).toBe("good")
      const [row] = yield* sql<{ key_id: string }>`SELECT key_id FROM vault_secrets WHERE id = ${bad}`
      expect(row!.key_id).not.toBe(report.keyId)
      yield* sql`DELETE FROM vault_secrets WHERE id = ${bad}`
    })))

  it.scoped("concurrent first seals create exactly one active data key", () =>
    withDatabase(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`DELETE FROM vault_secrets`
      yield* sql`DELETE FROM vault_keys`
      const master = masterKey()
      const replicas = yield* Effect.all(Array.from({ length: 4 }, () => replica(keys(master))))
      const sealed = yield* Effect.forEach(
        replicas,
        (v, i) => sql.withTransaction(v.store(Redacted.make(`s-${i}`), owner(`t-${i}`))),
        { concurrency: "unbounded" }
      )
      const active = yield* sql<{ id: string }>`SELECT id FROM vault_keys WHERE state = 'active'`
      expect(active.length).toBe(1)
      const used = yield* sql<{ key_id: string }>`SELECT DISTINCT key_id FROM vault_secrets`
      expect(used.map((r) => r.key_id)).toEqual([active[0]!.id])
      for (const [i, id] of sealed.entries()) expect(Redacted.value(yield* replicas[0]!.open(id, owner(`t-${i}`)))).toBe(`s-${i}`)
    })))

  it.scoped("secrets never appear in logs or errors: sealing, opening, failing and rotating log ids only", () =>
    withDatabase(Effect.gen(function*() {
      const master = Vault.generateMasterKey()
      const parsed = Either.getOrThrow(Vault.parseMasterKey(master))
      const plaintext = "PLAINTEXT-never-logged-7f3a"
      const { lines, result } = yield* captureLogs(Effect.gen(function*() {
        const vault = yield* Vault.make(keys(parsed))
        const id = yield* vault.store(Redacted.make(plaintext), owner("t-1"))
        yield* vault.open(id, owner("t-1"))
        const wrongOwner = yield* Effect.flip(vault.open(id, owner("t-2")))
        const report = yield* vault.rotate()
        yield* Effect.logError("failed", wrongOwner)
        return { wrongOwner, report }
      }))
      expect(lines.some((l) => l.includes("rotation"))).toBe(true)
      const everything = [...lines, String(result.wrongOwner), result.wrongOwner.message, JSON.stringify(result.report)].join("\n")
      expect(everything).not.toContain(plaintext)
      expect(everything).not.toContain(Redacted.value(master))
      expect(everything).not.toContain(Buffer.from(Redacted.value(parsed.bytes)).toString("hex"))
    })))
})
