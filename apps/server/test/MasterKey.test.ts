import { describe, expect, it } from "@effect/vitest"
import { Vault } from "@crm-relay/store"
import { Effect, Either, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MasterKey from "../src/config/MasterKey.js"
import { tempDir } from "./support/TempDir.js"


const settings = (overrides: Partial<MasterKey.MasterKeySettings> & { readonly dataDir: string }): MasterKey.MasterKeySettings => ({
  masterKey: Option.none(),
  masterKeyPrevious: Option.none(),
  databaseUrl: Option.none(),
  ...overrides
})

describe("MASTER_KEY resolution", () => {
  it.scoped("MASTER_KEY (and MASTER_KEY_PREVIOUS, comma-separated) are read as 32-byte base64 keys; a bad one is refused naming the setting, never the value", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir("crm-relay-master-key-")
      const current = Vault.generateMasterKey()
      const old = [Vault.generateMasterKey(), Vault.generateMasterKey()]
      const keys = yield* MasterKey.resolve(settings({
        dataDir,
        masterKey: Option.some(current),
        masterKeyPrevious: Option.some(Redacted.make(` ${Redacted.value(old[0]!)} ,${Redacted.value(old[1]!)}`))
      }))
      expect(keys.current.id).toBe(Either.getOrThrow(Vault.parseMasterKey(current)).id)
      expect(keys.previous.map((k) => k.id)).toEqual(old.map((k) => Either.getOrThrow(Vault.parseMasterKey(k)).id))
      // Nothing is generated when MASTER_KEY is set.
      expect(Fs.existsSync(MasterKey.keyFile(dataDir))).toBe(false)

      const bad = yield* Effect.flip(MasterKey.resolve(settings({ dataDir, masterKey: Option.some(Redacted.make("too-short-secret")) })))
      expect(bad.message).toContain("MASTER_KEY must be 32 random bytes in base64")
      expect(bad.message).not.toContain("too-short-secret")
      const badPrevious = yield* Effect.flip(MasterKey.resolve(settings({
        dataDir,
        masterKey: Option.some(current),
        masterKeyPrevious: Option.some(Redacted.make("nope"))
      })))
      expect(badPrevious.message).toContain("Each key of MASTER_KEY_PREVIOUS must be 32 random bytes in base64")
    }))

  it.scoped("with DATABASE_URL and no MASTER_KEY nothing is generated: refused, saying what to set", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir("crm-relay-master-key-")
      const refused = yield* Effect.flip(MasterKey.resolve(settings({ dataDir, databaseUrl: Option.some(Redacted.make("postgres://db/x")) })))
      expect(refused.message).toContain("MASTER_KEY must be set when DATABASE_URL is")
      expect(refused.message).toContain("openssl rand -base64 32")
      expect(Fs.existsSync(MasterKey.keyFile(dataDir))).toBe(false)
    }))

  it.scoped("development (embedded database, no MASTER_KEY): a key is generated once into DATA_DIR/master-key (mode 0600) and reused", () =>
    Effect.gen(function*() {
      const dataDir = Path.join(yield* tempDir("crm-relay-master-key-"), "data")
      const first = yield* MasterKey.resolve(settings({ dataDir }))
      const file = MasterKey.keyFile(dataDir)
      expect(Fs.statSync(file).mode & 0o777).toBe(0o600)
      expect(Either.getOrThrow(Vault.parseMasterKey(Redacted.make(Fs.readFileSync(file, "utf8")))).id).toBe(first.current.id)
      const second = yield* MasterKey.resolve(settings({ dataDir }))
      expect(second.current.id).toBe(first.current.id)
      // A damaged key file is refused rather than silently replaced (it may be all that opens the stored secrets).
      Fs.writeFileSync(file, "damaged\n")
      const damaged = yield* Effect.flip(MasterKey.resolve(settings({ dataDir })))
      expect(damaged.message).toContain(file)
    }))
})
