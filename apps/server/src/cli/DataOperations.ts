/**
 * `crm-relay db backup | restore | move`: the data's whole life on the one
 * backup format of `@crm-relay/store/Backup`.
 *
 * - backup: PostgreSQL directly; the embedded database through the running
 *   server (GET /v1/backup) when there is one, else directly under the data
 *   directory's lock. Written beside FILE, checked whole, then renamed onto it.
 * - restore: the file is read whole first (checksums, level, master key);
 *   then one transaction on PostgreSQL, or a new directory beside DATA_DIR's
 *   that is renamed into place only once complete.
 * - move: a backup of the (stopped) embedded database, restored into an empty
 *   PostgreSQL database.
 * Every refusal is one sentence and exit code 2, with the target untouched.
 */
import { HttpClient, HttpClientRequest, FetchHttpClient } from "@effect/platform"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Catalog from "@crm-relay/store/Backup/Catalog"
import * as Format from "@crm-relay/store/Backup/Format"
import * as Load from "@crm-relay/store/Backup/Load"
import * as Snapshot from "@crm-relay/store/Backup/Snapshot"
import * as Database from "@crm-relay/store/Database"
import * as DataDirLock from "@crm-relay/store/DataDirLock"
import * as PgliteClient from "@crm-relay/store/PgliteClient"
import type * as Vault from "@crm-relay/store/Vault"
import { Effect, Layer, Option, Redacted, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AdminError, databaseFailure, refused } from "./AdminError.js"
import * as Progress from "./Progress.js"
import * as AdminToken from "../config/AdminToken.js"
import * as MasterKey from "../config/MasterKey.js"
import * as ServerFile from "../config/ServerFile.js"
import * as Settings from "../config/Settings.js"
import { VERSION } from "../config/Version.js"
import * as Logging from "../observability/Logging.js"

/** Where a PostgreSQL URL points, without its password. */
const describeUrl = (url: string): string => {
  const parsed = new URL(url)
  return `${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
}

const rows = (manifest: Format.Manifest) => manifest.parts.reduce((sum, part) => sum + part.rows, 0)

/** A file's size in MiB, for a sentence. */
const mib = (path: string) => (Fs.statSync(path).size / 1_048_576).toFixed(1)

/** Runs `effect`, removing `path` (file or directory) when it fails. */
const removedOnFailure = (path: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.onError(effect, () => Effect.sync(() => Fs.rmSync(path, { recursive: true, force: true })))

/** A PostgreSQL pool of two for `url`; an unreachable server or a wrong URL is refused in one sentence. */
const postgres = (url: string) =>
  Layer.catchAll(
    Database.layerPostgres({ url: Redacted.make(url), poolSize: 2 }),
    (error) =>
      Layer.fail(refused(`PostgreSQL at ${describeUrl(url)} cannot be reached: ${error.cause instanceof Error ? error.cause.message : error.message}.`))
  )

/** Refuses a URL that is not PostgreSQL's. */
const postgresUrl = (text: string): Effect.Effect<string, AdminError> => {
  try {
    const parsed = new URL(text)
    if (parsed.protocol === "postgres:" || parsed.protocol === "postgresql:") return Effect.succeed(text)
  } catch {
    // Falls through to the refusal.
  }
  return Effect.fail(refused("The target must be a PostgreSQL URL, as postgres://user:password@host:5432/database."))
}

/** Refuses while a server holds the embedded database of `dataDir`. */
const noServer = (dataDir: string, what: string) =>
  Effect.flatMap(ServerFile.running(dataDir), (running) =>
    Option.isSome(running)
      ? Effect.fail(refused(`A server (pid ${running.value.pid}) is running on ${dataDir}: stop it before ${what}.`))
      : Effect.void)

/** The master keys to check a backup with: MASTER_KEY, or the development key file of `dataDir`; none when neither is there. */
const keysOf = (settings: Settings.CliSettings, dataDir: string) =>
  Option.isNone(settings.masterKey) && !Fs.existsSync(MasterKey.keyFile(dataDir))
    ? Effect.succeed(Option.none<Vault.MasterKeys>())
    : MasterKey.resolve({ ...settings, databaseUrl: Option.none(), dataDir }).pipe(
      Effect.map(Option.some),
      Effect.mapError((error) => refused(error.message))
    )

/** Reads the whole backup at `path`, refusing a damaged, newer or foreign one, and one the master key does not open. */
const checked = (path: string, keys: Option.Option<Vault.MasterKeys>, keyHint: string) =>
  Effect.gen(function*() {
    if (!Fs.existsSync(path)) return yield* refused(`No backup file at ${path}.`)
    const sealed: Load.Sealed = { wraps: [], secret: undefined }
    const manifest = yield* Format.read(path, Load.collectSealed(sealed)).pipe(
      Effect.mapError((error) => refused(`${path} is refused: ${error.message}`))
    )
    const incompatible = Load.incompatibility(manifest)
    if (Option.isSome(incompatible)) return yield* refused(incompatible.value)
    if (sealed.secret !== undefined && Option.isNone(keys)) {
      return yield* refused(`The backup's secrets are sealed under master key ${manifest.master_key_ids.join(", ")}: ${keyHint}`)
    }
    if (Option.isSome(keys)) yield* Effect.mapError(Load.checkKeys(sealed, keys.value, manifest), (error) => refused(error.message))
    return manifest
  })

/** Writes a backup of the database of the context to `file`, its progress reported as `label`. */
const dump = (file: string, label: string, progress: Progress.Mode) =>
  Effect.gen(function*() {
    const info = yield* Database.DatabaseInfo
    const total = yield* Snapshot.rowCounts
    let done = 0
    yield* Format.writeFile(file, (writer) =>
      Snapshot.dump(writer, { crmRelayVersion: VERSION, database: info.kind }, (n) =>
        n === 0 ? Effect.void : Progress.report(progress, label, (done += n), Math.max(total, done), n)))
  })

/** A database failure is the operator's sentence; a refusal stays one. */
const asAdminError = (error: unknown): AdminError => error instanceof AdminError ? error : databaseFailure(error)

/** What `backup` reports. */
export interface BackupReport {
  readonly file: string
  readonly bytes: number
  readonly manifest: Format.Manifest
  readonly keyAdvice: string
}

/** Streams the running server's backup (GET /v1/backup) into `path`. */
const fromServer = (adminUrl: string, token: Redacted.Redacted<string>, path: string) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(
      HttpClientRequest.get(`${adminUrl}/v1/backup`).pipe(HttpClientRequest.bearerToken(Redacted.value(token)))
    )
    if (response.status === 401) {
      return yield* new AdminError({ message: "The running server refused the admin token (set ADMIN_TOKEN, or keep DATA_DIR/admin-token)." })
    }
    if (response.status !== 200) return yield* new AdminError({ message: `The running server at ${adminUrl} answered ${response.status} to the backup.` })
    // Not the derived client: it would hold the whole body in memory; this writes it as it comes.
    yield* Stream.run(response.stream, NodeSink.fromWritable(() => Fs.createWriteStream(path), (error) => error))
  }).pipe(
    Effect.mapError((error) => error instanceof AdminError ? error : new AdminError({ message: `The backup from the running server at ${adminUrl} stopped half-way.` })),
    Effect.provide(FetchHttpClient.layer)
  )

/** Writes a backup of this environment's database to `file`. */
export const backup = (settings: Settings.CliSettings, file: string, options: { readonly force: boolean; readonly progress: Progress.Mode }) =>
  Effect.gen(function*() {
    const target = Path.resolve(file)
    if (Fs.existsSync(target) && !options.force) {
      return yield* refused(`${file} exists: give another path, or --force to replace it.`)
    }
    const partial = `${target}.partial-${process.pid}`
    const local = (layer: Layer.Layer<Database.Services, unknown>) => Effect.provide(dump(partial, "Backing up", options.progress), layer)
    yield* Option.match(settings.databaseUrl, {
      onSome: (url) => local(postgres(Redacted.value(url))),
      onNone: () =>
        Effect.gen(function*() {
          const running = yield* ServerFile.running(settings.dataDir)
          if (Option.isSome(running)) {
            const token = Option.isSome(settings.adminToken) ? settings.adminToken : yield* AdminToken.read(settings.dataDir)
            if (Option.isNone(token)) {
              return yield* new AdminError({ message: `A server is running (pid ${running.value.pid}) but neither ADMIN_TOKEN nor ${AdminToken.tokenFile(settings.dataDir)} gives its admin token.` })
            }
            return yield* fromServer(running.value.adminUrl, token.value, partial)
          }
          if (!Fs.existsSync(Database.pgliteDirectory(settings.dataDir))) {
            return yield* refused(`${settings.dataDir} holds no embedded database to back up (set DATABASE_URL for PostgreSQL).`)
          }
          return yield* local(Database.layerPglite({ dataDir: settings.dataDir }))
        })
    }).pipe(Effect.mapError(asAdminError), removedOnFailure(partial))
    // The file is read back whole before it takes the name: a backup that does not check is never left as one.
    const manifest = yield* Format.read(partial).pipe(
      Effect.mapError((error) => new AdminError({ message: `The backup written did not check (${error.message}); nothing was kept.` })),
      removedOnFailure(partial)
    )
    Fs.renameSync(partial, target)
    const keyAdvice = Option.isSome(settings.masterKey)
      ? "keep your MASTER_KEY with it (apart from the file)"
      : Option.isNone(settings.databaseUrl) && Fs.existsSync(MasterKey.keyFile(settings.dataDir))
      ? `keep the development key file ${MasterKey.keyFile(settings.dataDir)} with it (apart from the file)`
      : "keep the MASTER_KEY it was made with"
    return { file: target, bytes: Fs.statSync(target).size, manifest, keyAdvice } satisfies BackupReport
  })

/** Human summary of a backup. */
export const backupSentence = (report: BackupReport) =>
  `Wrote ${report.file} (${mib(report.file)} MiB): ${rows(report.manifest)} rows of ${report.manifest.parts.length} tables, ` +
  `migration level ${report.manifest.migration_level}, from ${report.manifest.database}.\n` +
  `It holds no master key: its secrets stay sealed (master key ${report.manifest.master_key_ids.join(", ") || "none yet"}) ` +
  `and open only with the same key, so ${report.keyAdvice}.`

/** Loads the checked backup `path` into the database of `layer` (a fresh transaction; refused unless it is empty). */
const loadInto = (
  path: string,
  manifest: Format.Manifest,
  layer: Layer.Layer<SqlClient.SqlClient, AdminError>,
  where: string,
  progress: Progress.Mode
) =>
  Effect.gen(function*() {
    const tables = yield* Catalog.tableCount
    if (tables > 0) return yield* refused(`${where} is not empty (it has ${tables} tables): give an empty database.`)
    const total = rows(manifest)
    let done = 0
    yield* Load.load(path, manifest, (n) => Progress.report(progress, "Restoring", (done += n), total, n))
  }).pipe(Effect.provide(layer), Effect.mapError((error) => error instanceof Load.BackupRefused ? refused(error.message) : asAdminError(error)))

/** Restores `file` into PostgreSQL (DATABASE_URL) or into DATA_DIR's embedded database. */
export const restore = (settings: Settings.CliSettings, file: string, options: { readonly progress: Progress.Mode }) =>
  Effect.gen(function*() {
    const path = Path.resolve(file)
    if (Option.isSome(settings.databaseUrl)) {
      const url = Redacted.value(settings.databaseUrl.value)
      const keys = Option.isSome(settings.masterKey) ? yield* keysOf(settings, settings.dataDir) : Option.none()
      const manifest = yield* checked(path, keys, "set MASTER_KEY to that key.")
      yield* loadInto(path, manifest, postgres(url), `The database at ${describeUrl(url)}`, options.progress)
      return { manifest, where: describeUrl(url) }
    }
    const dataDir = settings.dataDir
    const target = Database.pgliteDirectory(dataDir)
    const keys = yield* keysOf(settings, dataDir)
    const manifest = yield* checked(path, keys, `set MASTER_KEY, or copy the development key file kept with the backup to ${MasterKey.keyFile(dataDir)}.`)
    yield* noServer(dataDir, "restoring into it")
    if (Fs.existsSync(target) && Fs.readdirSync(target).length > 0) {
      return yield* refused(`${dataDir} already holds an embedded database: restore into an empty DATA_DIR.`)
    }
    // Built beside the target and renamed into place once whole: a failure leaves no half database.
    const building = `${target}.restoring-${process.pid}`
    Fs.rmSync(building, { recursive: true, force: true })
    yield* Effect.scoped(Effect.gen(function*() {
      yield* DataDirLock.acquire(target).pipe(Effect.mapError((error) => refused(error.message)))
      yield* loadInto(
        path,
        manifest,
        Layer.catchAll(PgliteClient.layer({ dataDir: building }), (error) => Layer.fail(asAdminError(error))),
        `The embedded database being built in ${building}`,
        options.progress
      )
    })).pipe(removedOnFailure(building))
    if (Fs.existsSync(target)) Fs.rmdirSync(target)
    Fs.renameSync(building, target)
    return { manifest, where: target }
  })

/** Moves DATA_DIR's embedded database into the empty PostgreSQL database at `to`. */
export const move = (settings: Settings.CliSettings, to: string, options: { readonly progress: Progress.Mode }) =>
  Effect.gen(function*() {
    const url = yield* postgresUrl(to)
    if (Option.isSome(settings.databaseUrl)) {
      return yield* refused("DATABASE_URL is set: db move copies the embedded database of DATA_DIR; unset DATABASE_URL to run it.")
    }
    const dataDir = settings.dataDir
    yield* noServer(dataDir, "moving its database (writes accepted meanwhile would be left behind)")
    if (!Fs.existsSync(Database.pgliteDirectory(dataDir))) return yield* refused(`${dataDir} holds no embedded database to move.`)
    const keys = yield* keysOf(settings, dataDir)
    const where = `The database at ${describeUrl(url)}`
    // The target is checked before the (long) read of the source.
    const empty = yield* Effect.provide(Catalog.tableCount, postgres(url)).pipe(Effect.mapError(asAdminError))
    if (empty > 0) return yield* refused(`${where} is not empty (it has ${empty} tables): give an empty database.`)

    const file = Path.join(dataDir, `move-${process.pid}.crm-relay-backup`)
    return yield* Effect.gen(function*() {
      yield* dump(file, "Reading", options.progress).pipe(Effect.provide(Database.layerPglite({ dataDir })), Effect.mapError(asAdminError))
      const manifest = yield* checked(file, keys, `set MASTER_KEY, or keep the development key file at ${MasterKey.keyFile(dataDir)}.`)
      yield* loadInto(file, manifest, postgres(url), where, options.progress)
      const masterKey = Option.isSome(settings.masterKey)
        ? "MASTER_KEY: the same MASTER_KEY as now"
        : Option.isSome(keys)
        ? `MASTER_KEY: the key in ${MasterKey.keyFile(dataDir)} (MASTER_KEY="$(cat ${MasterKey.keyFile(dataDir)})")`
        : "MASTER_KEY: a new key (openssl rand -base64 32); nothing sealed is stored yet"
      return { manifest, where: describeUrl(url), masterKey }
    }).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(file, { force: true }))))
  })

/** Runs a db command with its logs on stderr (stdout carries only its result). */
export const run = <A, E>(f: (settings: Settings.CliSettings) => Effect.Effect<A, E>) =>
  Effect.flatMap(Settings.CliSettings, (settings) => Effect.provide(f(settings), Logging.layer(settings.logLevel, "stderr")))

/** The rows a report counts. */
export const rowsOf = rows
