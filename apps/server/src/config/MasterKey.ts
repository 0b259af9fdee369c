/**
 * The master keys of this process (see `Vault.MasterKeys`):
 *
 * - `MASTER_KEY` when set (32 bytes, base64), plus `MASTER_KEY_PREVIOUS`
 *   (comma-separated) while the master key changes;
 * - otherwise, with the embedded database only (development), a random key
 *   generated once into `DATA_DIR/master-key` (mode 0600) with a loud
 *   warning: losing that file loses every stored credential;
 * - with `DATABASE_URL` and no `MASTER_KEY`, nothing: a key generated on one
 *   replica would not be shared by the others, so the process refuses to
 *   start and says what to set.
 */
import { Vault } from "@crm-relay/store"
import { Console, Data, Effect, Either, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The master key configuration is missing or malformed; `message` says what to set (never a key). */
export class MasterKeyError extends Data.TaggedError("MasterKeyError")<{ readonly message: string }> {}

/** Where a generated development key is kept. */
export const keyFile = (dataDir: string): string => Path.join(dataDir, "master-key")

/** What the master keys are resolved from. */
export interface MasterKeySettings {
  readonly masterKey: Option.Option<Redacted.Redacted<string>>
  readonly masterKeyPrevious: Option.Option<Redacted.Redacted<string>>
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
}

const parse = (text: Redacted.Redacted<string>, name: string) =>
  Either.mapLeft(Vault.parseMasterKey(text, name), (message) => new MasterKeyError({ message }))

const previousKeys = (settings: MasterKeySettings) =>
  Option.match(settings.masterKeyPrevious, {
    onNone: () => Effect.succeed<ReadonlyArray<Vault.MasterKey>>([]),
    onSome: (list) =>
      Effect.forEach(
        Redacted.value(list).split(",").map((s) => s.trim()).filter((s) => s !== ""),
        (text) => parse(Redacted.make(text), "Each key of MASTER_KEY_PREVIOUS")
      )
  })

/** The stored development key, if a readable one exists. */
const readKeyFile = (dataDir: string) =>
  Effect.sync(() => {
    try {
      const text = Fs.readFileSync(keyFile(dataDir), "utf8").trim()
      return text === "" ? Option.none<Redacted.Redacted<string>>() : Option.some(Redacted.make(text))
    } catch {
      return Option.none<Redacted.Redacted<string>>()
    }
  })

/** The development key of `dataDir`: the stored one, or a new one (stored, with a warning). */
const developmentKey = (dataDir: string) =>
  Effect.gen(function*() {
    const stored = yield* readKeyFile(dataDir)
    if (Option.isSome(stored)) {
      return yield* parse(stored.value, `The development master key in ${keyFile(dataDir)}`)
    }
    const generated = Vault.generateMasterKey()
    const file = keyFile(dataDir)
    yield* Effect.sync(() => {
      Fs.mkdirSync(dataDir, { recursive: true })
      // `wx`: never overwrite a key another process wrote meanwhile (it may already seal secrets).
      try {
        Fs.writeFileSync(file, `${Redacted.value(generated)}\n`, { mode: 0o600, flag: "wx" })
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      }
    })
    const written = yield* readKeyFile(dataDir)
    const key = yield* parse(Option.getOrElse(written, () => generated), `The development master key in ${file}`)
    // Not a log record only: an operator must see this even with logs off.
    yield* Console.error(
      `MASTER_KEY was not set: generated a development master key into ${file}. ` +
        "Every stored bridge credential and signing secret is encrypted under it: keep a copy of the file apart from " +
        "DATA_DIR and its backups, or set MASTER_KEY from a file made once (see the README's Install)."
    )
    yield* Effect.logWarning("MASTER_KEY not set; using a generated development master key").pipe(
      Effect.annotateLogs({ file, master_key_id: key.id })
    )
    return key
  })

/** Resolves the master keys (see the module comment). */
export const resolve = (settings: MasterKeySettings): Effect.Effect<Vault.MasterKeys, MasterKeyError> =>
  Effect.gen(function*() {
    const previous = yield* previousKeys(settings)
    if (Option.isSome(settings.masterKey)) {
      return { current: yield* parse(settings.masterKey.value, "MASTER_KEY"), previous }
    }
    if (Option.isSome(settings.databaseUrl)) {
      return yield* new MasterKeyError({
        message: "MASTER_KEY must be set when DATABASE_URL is: every replica has to use the same key to read the " +
          "credentials the others store. Generate one with `openssl rand -base64 32` and give it to every replica."
      })
    }
    return { current: yield* developmentKey(settings.dataDir), previous }
  })

/** A random master key for every server of this process that is given none (tests sharing one process). */
export const processLocal: Vault.MasterKeys = Vault.randomMasterKeys()
