/**
 * An `@effect/sql` `SqlClient` over embedded PGlite, in process (no socket).
 *
 * PGlite is ONE PostgreSQL session, so everything is serialized by one
 * permit: a statement outside a transaction holds it for that statement; a
 * transaction (and `sql.reserve`) holds it from BEGIN to COMMIT/ROLLBACK,
 * and the statements inside run on the transaction connection without asking
 * for it again. Nested transactions are savepoints, as `@effect/sql` does.
 * Statements compile with the PostgreSQL compiler of `@effect/sql-pg`, so
 * `sql.insert`, `sql.in`, `sql.json` ... behave as they do on PostgreSQL, and
 * results are parsed by the same type table as the PostgreSQL Layer.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import type { PGlite, Results } from "@electric-sql/pglite"
import { Context, Effect, Layer, Scope, Stream } from "effect"
import { parserFor, prepareValue } from "./internal/valueTypes.js"
import * as Carried from "./Carried.js"
import * as DataDirLock from "./DataDirLock.js"
import * as PgliteCrash from "./PgliteCrash.js"
import * as V8Flags from "./V8Flags.js"

/** A `SqlClient` over one PGlite instance, plus what a notifier needs. */
export interface PgliteClient extends Client.SqlClient {
  /** The PGlite instance; do not query it directly (it would bypass the permit). */
  readonly pglite: PGlite
  /** A JSON parameter, as `PgClient.json` (compiled by the same PostgreSQL compiler). */
  readonly json: (value: unknown) => Statement.Fragment
  /** Registers a callback for every notification the session receives. */
  readonly onNotification: (callback: (channel: string, payload: string) => void) => Effect.Effect<void, never, Scope.Scope>
}

/** The PGlite client, for Layers that need more than `SqlClient`. */
export const PgliteClient = Context.GenericTag<PgliteClient>("@crm-relay/store/PgliteClient")

type RawRows = ReadonlyArray<Record<string, unknown>> | ReadonlyArray<ReadonlyArray<unknown>>
type Transform = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

const rawText = (text: string) => text

// The custom fragment kind `@effect/sql-pg`'s compiler turns into a JSON parameter.
interface PgJson extends Statement.Custom<"PgJson", unknown> {}
const PgJson = Statement.custom<PgJson>("PgJson")

/** Applies the shared type table to one result set of raw text values. */
const parseResult = (result: Results, rowMode: "object" | "array"): RawRows => {
  const parsers = result.fields.map((field) => parserFor(field.dataTypeID))
  if (rowMode === "array") {
    return (result.rows as unknown as ReadonlyArray<ReadonlyArray<string | null>>).map((row) =>
      row.map((value, i) => (value === null ? null : parsers[i]!(value)))
    )
  }
  const names = result.fields.map((field) => field.name)
  return (result.rows as ReadonlyArray<Record<string, string | null>>).map((row) => {
    const out: Record<string, unknown> = {}
    for (let i = 0; i < names.length; i++) {
      const value = row[names[i]!]
      out[names[i]!] = value === null || value === undefined ? null : parsers[i]!(value)
    }
    return out
  })
}

/**
 * Builds the client over `pglite`. It takes over the instance's result
 * parsers (it parses text itself, like the PostgreSQL Layer).
 */
export const make = (pglite: PGlite): Effect.Effect<PgliteClient, never, Reactivity.Reactivity | Scope.Scope> =>
  Effect.gen(function*() {
    yield* Effect.promise(() => pglite.waitReady)
    for (const key of Object.keys(pglite.parsers)) pglite.parsers[key] = rawText

    const compiler = PgClient.makeCompiler()
    const permit = yield* Effect.makeSemaphore(1)
    // When the scope closes, wait for the statement or transaction in flight
    // and keep the permit: nothing runs after that (the instance may close).
    yield* Effect.addFinalizer(() => permit.take(1))

    /**
     * Runs one statement. Without parameters it uses the simple protocol, so
     * several statements may be sent at once (as node-postgres does); a
     * multi-statement text answers one row array per statement.
     */
    const run = (sql: string, params: ReadonlyArray<unknown>, rowMode: "object" | "array") =>
      Effect.tryPromise({
        try: async (): Promise<ReadonlyArray<unknown>> => {
          if (params.length === 0) {
            const results = await pglite.exec(sql, { rowMode })
            return results.length === 1 ? parseResult(results[0]!, rowMode) : results.map((r) => parseResult(r, rowMode))
          }
          const result = await pglite.query<Record<string, unknown>>(sql, params.map(prepareValue), { rowMode })
          return parseResult(result, rowMode)
        },
        catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
      })

    const makeConnection = (guard: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>): Connection => {
      const execute = (sql: string, params: ReadonlyArray<unknown>, transformRows: Transform) =>
        guard(run(sql, params, "object")).pipe(
          Effect.map((rows) => (transformRows ? transformRows(rows as ReadonlyArray<object>) : rows))
        )
      return {
        execute,
        executeRaw: (sql, params) => guard(run(sql, params, "object")),
        executeStream: (sql, params, transformRows) =>
          Stream.fromIterableEffect(execute(sql, params, transformRows)),
        executeValues: (sql, params) =>
          guard(run(sql, params, "array")) as Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError>,
        executeUnprepared: execute
      }
    }

    // Outside a transaction each statement takes the one permit for itself.
    const statementConnection = makeConnection(permit.withPermits(1))
    // A transaction (or a reserved connection) holds the permit until its scope closes.
    const sessionConnection = makeConnection((effect) => effect)
    const reserveSession: Effect.Effect<Connection, never, Scope.Scope> = Effect.acquireRelease(
      permit.take(1),
      () => permit.release(1)
    ).pipe(Effect.as(sessionConnection))

    const client = yield* Client.make({
      acquirer: Effect.succeed(statementConnection),
      transactionAcquirer: reserveSession,
      compiler,
      spanAttributes: [["db.system.name", "postgresql"], ["db.namespace", "pglite"]]
    })

    return Object.assign(client, {
      pglite,
      json: (value: unknown) => PgJson(value),
      onNotification: (callback: (channel: string, payload: string) => void) =>
        Effect.acquireRelease(
          Effect.sync(() => pglite.onNotification(callback)),
          (off) => Effect.sync(off)
        ).pipe(Effect.asVoid)
    })
  })

/**
 * V8 runs WebAssembly through its baseline compiler (Liftoff) and recompiles
 * the functions it finds hot with TurboFan, in the background. For
 * PostgreSQL's largest functions (the parser above all) that recompile cost
 * about 0.5 s of CPU and 500 MiB of transient memory at every start, while
 * our statements spend their time in JavaScript, not in PostgreSQL: Liftoff
 * code only. The flags are process-wide and act on modules compiled after
 * them; a process on PostgreSQL never sets them.
 */
const baselineWasmOnly = (): void => {
  V8Flags.set("--no-wasm-tier-up", "--wasm-tier-up")
  V8Flags.set("--no-wasm-dynamic-tiering", "--wasm-dynamic-tiering")
}

/**
 * PGlite's defaults plus a shared buffer pool of 16 MB instead of
 * PostgreSQL's 128 MB: PGlite touches the whole pool at start, and a
 * single-session embedded database reads through the OS page cache anyway.
 * Start parameters, not `postgresql.conf`: nothing is written to the data
 * directory.
 */
const startParams = (defaults: ReadonlyArray<string>): Array<string> => [...defaults, "-c", "shared_buffers=16MB"]

/**
 * PGlite's WebAssembly and data when the executable carries them (PGlite
 * would look for them beside its own module, on disk); nothing otherwise.
 */
const Wasm = (globalThis as unknown as { readonly WebAssembly: { readonly compile: (bytes: Uint8Array) => Promise<WebAssembly.Module> } }).WebAssembly
const carriedFiles = async () => {
  const files = Carried.files("pglite/")
  const pglite = files?.get("pglite.wasm")
  const initdb = files?.get("initdb.wasm")
  const data = files?.get("pglite.data")
  if (pglite === undefined || initdb === undefined || data === undefined) return {}
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([Wasm.compile(pglite), Wasm.compile(initdb)])
  return { pgliteWasmModule, initdbWasmModule, fsBundle: new Blob([data]) }
}

/** Opens PGlite in memory or in `dataDir` (taking its lock), closed with the scope. */
export const open = (options: {
  readonly dataDir?: string | undefined
  readonly loadDataDir?: Blob | undefined
}): Effect.Effect<PGlite, SqlError | DataDirLock.DataDirInUse, Scope.Scope> =>
  Effect.gen(function*() {
    if (options.dataDir !== undefined) yield* DataDirLock.acquire(options.dataDir)
    // Loaded only here: a process on PostgreSQL (or a CLI command that prints help) never loads PGlite.
    baselineWasmOnly()
    const { PGlite } = yield* Effect.promise(() => import("@electric-sql/pglite"))
    // A crashed instance ends the process (see PgliteCrash); a supervisor starts it again.
    const crashWatch = yield* PgliteCrash.exitOnCrash
    return yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () =>
          PGlite.create({
            ...(await carriedFiles()),
            extensions: { crashWatch },
            startParams: startParams(PGlite.defaultStartParams),
            ...(options.dataDir !== undefined ? { dataDir: options.dataDir } : {}),
            ...(options.loadDataDir !== undefined ? { loadDataDir: options.loadDataDir } : {})
          }),
        catch: (cause) => new SqlError({ cause, message: "Could not open the embedded database" })
      }),
      (pglite) =>
        pglite.closed ? Effect.void : Effect.tryPromise(() => pglite.close()).pipe(Effect.ignore)
    )
  })

/** Builds the client Layer (`PgliteClient` and `SqlClient`) over an instance the caller owns. */
export const layerFromInstance = (pglite: PGlite): Layer.Layer<PgliteClient | Client.SqlClient> =>
  Layer.scopedContext(
    Effect.map(make(pglite), (client) => Context.make(PgliteClient, client).pipe(Context.add(Client.SqlClient, client)))
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * Opens PGlite (in `dataDir`, or in memory) and provides the client; the
 * database is closed when the Layer is released, after the last statement.
 */
export const layer = (options: {
  readonly dataDir?: string | undefined
  readonly loadDataDir?: Blob | undefined
}): Layer.Layer<PgliteClient | Client.SqlClient, SqlError | DataDirLock.DataDirInUse> =>
  Layer.scopedContext(
    Effect.gen(function*() {
      const pglite = yield* open(options)
      // Released first: waits for the statement in flight, then PGlite closes.
      const client = yield* make(pglite)
      return Context.make(PgliteClient, client).pipe(Context.add(Client.SqlClient, client))
    })
  ).pipe(Layer.provide(Reactivity.layer))
