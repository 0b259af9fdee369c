/**
 * The database chosen by configuration: real PostgreSQL when a URL is given
 * (a real pool), otherwise embedded PGlite in `<dataDir>/pglite`. Both
 * provide `SqlClient`, a `Notifier` and `DatabaseInfo`; the SQL is the same.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import type { DataDirInUse } from "./DataDirLock.js"
import { STANDBY_CHECK, StandbyConnection, standbyOf } from "./internal/pgFailures.js"
import * as Notifier from "./Notifier.js"
import * as PgliteClient from "./PgliteClient.js"
import * as PostgresClient from "./PostgresClient.js"

/** Which database this process uses; `location` never holds a secret. */
export class DatabaseInfo extends Context.Tag("@crm-relay/store/DatabaseInfo")<
  DatabaseInfo,
  { readonly kind: "postgres" | "pglite"; readonly location: string }
>() {}

/** How to reach the database. */
export interface DatabaseOptions {
  /** PostgreSQL connection string; none → embedded PGlite. */
  readonly url: Option.Option<Redacted.Redacted>
  /** Directory of the embedded database (and other local state). */
  readonly dataDir: string
  /** Maximum connections of the PostgreSQL pool. */
  readonly poolSize: number
  /** A direct PostgreSQL connection (no transaction pooler) for LISTEN; none → `url`. */
  readonly sessionUrl?: Option.Option<Redacted.Redacted> | undefined
}

/** What a database Layer provides. */
export type Services = SqlClient.SqlClient | Notifier.Notifier | DatabaseInfo

/** Where the embedded database lives inside `dataDir`. */
export const pgliteDirectory = (dataDir: string): string => Path.join(dataDir, "pglite")

const describeUrl = (url: Redacted.Redacted): string => {
  try {
    const parsed = new URL(Redacted.value(url))
    return `${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
  } catch {
    return "postgresql"
  }
}

/**
 * Real PostgreSQL: a pool of `poolSize` connections that drops those on a
 * standby or broken, LISTEN/NOTIFY on its own connection (through
 * `sessionUrl` when set) that comes back by itself (see PostgresClient).
 */
export const layerPostgres = (options: {
  readonly url: Redacted.Redacted
  readonly poolSize: number
  readonly sessionUrl?: Option.Option<Redacted.Redacted> | undefined
}): Layer.Layer<Services | PgClient.PgClient, SqlError | PostgresClient.DatabaseRefused> =>
  Layer.mergeAll(
    Notifier.layerPg,
    Layer.succeed(DatabaseInfo, { kind: "postgres", location: describeUrl(options.url) })
  ).pipe(Layer.provideMerge(PostgresClient.layer(options)))

/** Embedded PGlite in `<dataDir>/pglite`, owned by this process while the Layer lives. */
export const layerPglite = (options: {
  readonly dataDir: string
}): Layer.Layer<Services | PgliteClient.PgliteClient, SqlError | DataDirInUse> => {
  const dir = pgliteDirectory(options.dataDir)
  return Layer.mergeAll(
    Notifier.layerPglite,
    Layer.succeed(DatabaseInfo, { kind: "pglite", location: Path.resolve(dir) })
  ).pipe(Layer.provideMerge(PgliteClient.layer({ dataDir: dir })))
}

/** PostgreSQL when `url` is set, otherwise embedded PGlite. */
export const layer = (
  options: DatabaseOptions
): Layer.Layer<Services, SqlError | DataDirInUse | PostgresClient.DatabaseRefused> =>
  Option.match(options.url, {
    onNone: () => layerPglite({ dataDir: options.dataDir }),
    onSome: (url) => layerPostgres({ url, poolSize: options.poolSize, sessionUrl: options.sessionUrl })
  })

/**
 * Why `/readyz` says not ready while a failover is under way: the pool
 * reaches a read-only server (a demoted primary, a standby behind a balancer
 * that has not moved yet), where `SELECT 1` would still succeed.
 */
export const READ_ONLY_STANDBY =
  "The database is a read-only standby (a failover is under way?): writes fail until the primary is reached again, " +
  "and the server resumes by itself; if this lasts, point DATABASE_URL at the primary."

/**
 * Readiness: whether the database takes writes, in one statement, failing
 * after `timeout` (2 s by default) when it does not answer. Answers the
 * reason it cannot take writes, if any: on PostgreSQL, a server in recovery
 * or read-only (asked on a pooled connection, or found by the pool refusing a
 * new connection that landed on one); PGlite runs a trivial statement.
 */
export const ping = (
  timeout: Duration.DurationInput = Duration.seconds(2)
): Effect.Effect<Option.Option<string>, SqlError, SqlClient.SqlClient | DatabaseInfo> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const info = yield* DatabaseInfo
    if (info.kind === "pglite") return yield* Effect.as(sql`SELECT 1`, Option.none<string>())
    return yield* sql.unsafe<{ recovery: unknown; read_only: unknown }>(STANDBY_CHECK).pipe(
      Effect.map((rows) => standbyOf(rows[0]) === undefined ? Option.none<string>() : Option.some(READ_ONLY_STANDBY)),
      Effect.catchIf((error) => error.cause instanceof StandbyConnection, () => Effect.succeedSome(READ_ONLY_STANDBY))
    )
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new SqlError({ message: "The database did not answer in time" })
    }),
    Effect.withSpan("Database.ping")
  )

/**
 * Below this much free space the embedded database's disk counts as full:
 * PostgreSQL grows its write-ahead log a 16 MiB segment at a time.
 */
export const MIN_FREE_BYTES = 16 * 1024 * 1024

/**
 * Why the embedded database cannot write, when its disk is full: for
 * `/readyz`. PGlite keeps running on a full disk (a write fails with "No
 * space left on device", reads still answer), so `ping` alone would say
 * ready. None on PostgreSQL (its server watches its own disk) or when the
 * space cannot be read.
 */
export const diskFull: Effect.Effect<Option.Option<string>, never, DatabaseInfo> = Effect.flatMap(
  DatabaseInfo,
  (info) =>
    info.kind !== "pglite"
      ? Effect.succeedNone
      : Effect.tryPromise(() => Fs.statfs(info.location)).pipe(
        Effect.map((stats) => {
          const free = stats.bavail * stats.bsize
          return free >= MIN_FREE_BYTES
            ? Option.none()
            : Option.some(
              `The disk of the embedded database is full (${mib(free)} MiB free, it needs ${mib(MIN_FREE_BYTES)} MiB): ` +
                "writes fail until space is freed where DATA_DIR is, and the server resumes by itself."
            )
        }),
        Effect.orElseSucceed(() => Option.none())
      )
).pipe(Effect.withSpan("Database.diskFull"))

const mib = (bytes: number): number => Math.floor(bytes / (1024 * 1024))
