/**
 * Which PostgreSQL failures leave a connection unfit for the pool, and the
 * errors that say so. After a failover a pooled connection may still reach
 * the demoted node (now a read-only standby) behind a balancer that keeps
 * old sessions or a DNS name: it answers every write with 25006 for as long
 * as it lives, so it must be dropped, never handed out again.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Data } from "effect"
import * as Pg from "pg"

/** SQLSTATEs after which the connection is dropped (besides class 08, connection exceptions). */
const DROPPING = new Set([
  "25006", // read_only_sql_transaction: the server is (now) a standby
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, shutting down, in recovery)
  "57P05" // idle_session_timeout
])

/** The SQLSTATE of a server's error (node-postgres' or PGlite's: both carry a severity), if `error` is one. */
export const sqlState = (error: unknown): string | undefined => {
  if (error instanceof Pg.DatabaseError) return error.code
  if (typeof error !== "object" || error === null || !("severity" in error) || !("code" in error)) return undefined
  return typeof error.code === "string" && /^[0-9A-Z]{5}$/.test(error.code) ? error.code : undefined
}

/**
 * True when the connection that raised `error` must not be used again: the
 * server is a standby or going away, or the failure was not the server's
 * answer at all (the socket, the protocol, a timeout).
 */
export const dropsConnection = (error: unknown): boolean => {
  if (error instanceof StandbyConnection) return true
  const code = sqlState(error)
  if (code === undefined) return true
  return DROPPING.has(code) || code.startsWith("08")
}

/** A new connection found itself on a server in recovery, or read-only: it is closed, never pooled. */
export class StandbyConnection extends Data.TaggedError("StandbyConnection")<{ readonly inRecovery: boolean }> {
  override get message(): string {
    return this.inRecovery
      ? "The connection reached a standby (pg_is_in_recovery() is true), which is read-only"
      : "The connection reached a read-only server (transaction_read_only is on)"
  }
}

/**
 * The statement that runs on each new connection before it is used: one
 * round trip, on new connections only.
 */
export const STANDBY_CHECK = "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only"

/** The failure of `STANDBY_CHECK`'s row, if it found a standby or a read-only server. */
export const standbyOf = (row: { recovery?: unknown; read_only?: unknown } | undefined): StandbyConnection | undefined => {
  const recovery = row?.recovery === true || row?.recovery === "t"
  const readOnly = row?.read_only === "on"
  return recovery || readOnly ? new StandbyConnection({ inRecovery: recovery }) : undefined
}

/** The message of an error that dropped its connection: the work may be retried at once. */
const TRANSIENT = "The database connection was dropped (lost, or on a read-only standby after a failover); retry"

/** What the server answered (its SQLSTATE and message) or what broke (a socket's error), for logs. */
const reason = (cause: unknown): string => {
  const code = sqlState(cause)
  const message = cause instanceof Error ? cause.message : String(cause)
  return code !== undefined ? `SQLSTATE ${code}: ${message}` : message
}

/**
 * A `SqlError` for `cause` from statement `what`, saying when the connection was dropped (transient)
 * and why: a 502's log line after a failover reads "SQLSTATE 25006: cannot execute INSERT in a
 * read-only transaction", not only that something failed.
 */
export const sqlError = (cause: unknown, what: string): SqlError =>
  new SqlError({ cause, message: `${dropsConnection(cause) ? `${TRANSIENT}: ${what}` : what} (${reason(cause)})` })

/**
 * True when `error` came from a connection that was dropped (a socket
 * failure, a server shutting down, a standby): retrying it soon, on another
 * connection, is expected to work. Never bad input.
 */
export const isTransient = (error: SqlError): boolean => error.cause !== undefined && dropsConnection(error.cause)
