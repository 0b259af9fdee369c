/**
 * The `Connection`s of the PostgreSQL client over a node-postgres pool:
 * one statement on any pooled connection, or every statement of a
 * transaction on one reserved connection. A connection whose statement
 * failed in a way that leaves it unfit (see `dropsConnection`), or whose
 * statement was interrupted, is destroyed instead of going back to the pool.
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type Scope, Stream } from "effect"
import type * as Pg from "pg"
import { dropsConnection, sqlError } from "./pgFailures.js"

type Rows = <A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>

/** A connection held for a transaction; `broken` is why it must be destroyed when given back. */
interface Reserved {
  readonly client: Pg.PoolClient
  broken: Error | undefined
}

const interrupted = () => new Error("The statement was interrupted; its connection is closed rather than reused")

/** Takes a connection from the pool; one that comes after the caller gave up goes straight back. */
const connect = (pool: Pg.Pool): Effect.Effect<Pg.PoolClient, SqlError> =>
  Effect.async<Pg.PoolClient, SqlError>((resume) => {
    let abandoned = false
    pool.connect((error, client) => {
      if (abandoned) {
        client?.release()
        return
      }
      if (error || client === undefined) resume(Effect.fail(sqlError(error ?? new Error("No connection"), "Failed to acquire a connection")))
      else resume(Effect.succeed(client))
    })
    return Effect.sync(() => {
      abandoned = true
    })
  })

/** Reserves a connection for the scope (a transaction); given back, or destroyed if it broke, at the scope's end. */
export const reserve = (pool: Pg.Pool): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.map(reserveRaw(pool), (reserved) => makeConnection(pool, reserved))

/** Runs `query` on `client`, resuming with its result; `settle` learns the outcome (error, or interruption). */
const onClient = <A>(
  client: Pg.PoolClient,
  query: (client: Pg.PoolClient, done: (error: Error | undefined, value?: A) => void) => void,
  settle: (failure: Error | undefined) => void
): Effect.Effect<A, SqlError> =>
  Effect.async<A, SqlError>((resume) => {
    let finished = false
    const onError = (error: Error) => {
      if (finished) return
      finished = true
      settle(error)
      resume(Effect.fail(sqlError(error, "The database connection failed")))
    }
    client.once("error", onError)
    query(client, (error, value) => {
      if (finished) return
      finished = true
      client.off("error", onError)
      settle(error !== undefined && dropsConnection(error) ? error : undefined)
      resume(error !== undefined ? Effect.fail(sqlError(error, "Failed to execute statement")) : Effect.succeed(value as A))
    })
    return Effect.sync(() => {
      if (finished) return
      finished = true
      client.off("error", onError)
      settle(interrupted())
    })
  })

/** A `Connection` on `reserved`, or on any pooled connection per statement when it is undefined. */
export const makeConnection = (pool: Pg.Pool, reserved?: Reserved): Connection => {
  const run = <A>(query: (client: Pg.PoolClient, done: (error: Error | undefined, value?: A) => void) => void) =>
    reserved !== undefined
      ? onClient(reserved.client, query, (failure) => {
        reserved.broken ??= failure
      })
      : Effect.flatMap(connect(pool), (client) => onClient(client, query, (failure) => client.release(failure)))

  const rows = (sql: string, params: ReadonlyArray<unknown>) =>
    run<ReadonlyArray<any>>((client, done) =>
      client.query(sql, params as Array<unknown>, (error: Error | null, result: any) =>
        error ? done(error) : done(undefined, Array.isArray(result) ? result.map((r) => r.rows ?? []) : result.rows ?? []))
    )

  const execute = (sql: string, params: ReadonlyArray<unknown>, transformRows: Rows | undefined) =>
    // A transaction whose connection broke is gone with it: its ROLLBACK has nothing to do (and
    // failing, it would turn the transaction's transient failure into a defect).
    reserved?.broken !== undefined && /^ROLLBACK\b/i.test(sql)
      ? Effect.succeed([])
      : transformRows
      ? Effect.map(rows(sql, params), transformRows)
      : rows(sql, params)

  return {
    execute,
    executeRaw: (sql, params) =>
      run<Pg.QueryResult>((client, done) =>
        client.query(sql, params as Array<unknown>, (error: Error | null, result: Pg.QueryResult) =>
          error ? done(error) : done(undefined, result))
      ),
    executeValues: (sql, params) =>
      run<ReadonlyArray<ReadonlyArray<unknown>>>((client, done) =>
        client.query({ text: sql, rowMode: "array", values: params as Array<unknown> }, (error: Error | null, result: any) =>
          error ? done(error) : done(undefined, result.rows))
      ),
    executeUnprepared: execute,
    // Nothing here streams large results: the rows are read at once (no server-side cursor).
    executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(execute(sql, params, transformRows))
  }
}

/** A connection reserved for the scope, destroyed at its end if it broke. */
function reserveRaw(pool: Pg.Pool): Effect.Effect<Reserved, SqlError, Scope.Scope> {
  return Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(restore(connect(pool)), (client) => {
      const reserved: Reserved = { client, broken: undefined }
      const onError = (error: Error) => {
        reserved.broken ??= error
      }
      client.on("error", onError)
      return Effect.as(
        Effect.addFinalizer(() =>
          Effect.sync(() => {
            client.off("error", onError)
            client.release(reserved.broken)
          })
        ),
        reserved
      )
    })
  )
}
