/**
 * What stands between this process and PostgreSQL: a connection string the
 * driver cannot follow (libpq's multi-host form), and whether connections go
 * through a transaction-mode pooler (PgBouncer), where a session (LISTEN)
 * does not survive its transaction.
 */
import type * as Pg from "pg"

/**
 * The hosts of `url` when it names more than one (libpq's
 * `postgres://h1:5432,h2:5432/db`, or `host=a,b`), which node-postgres
 * cannot follow: it would use one and never the others.
 */
export const multipleHosts = (url: string): ReadonlyArray<string> | undefined => {
  const trimmed = url.trim()
  const scheme = /^postgres(?:ql)?:\/\/([^/?#]*)/i.exec(trimmed)
  if (scheme !== null) {
    const authority = scheme[1]!
    const hosts = authority.slice(authority.lastIndexOf("@") + 1)
    if (hosts.includes(",")) return hosts.split(",")
  }
  // `host=a,b` as a URL parameter or in a key=value connection string.
  const param = /(?:^|[?&\s])host=([^&\s]*)/i.exec(trimmed)
  if (param !== null) {
    const value = decodeURIComponent(param[1]!)
    if (value.includes(",")) return value.split(",")
  }
  return undefined
}

/** The pid of the backend that ran the statement. */
const backendPid = async (client: Pg.Client): Promise<number> =>
  Number((await client.query("SELECT pg_backend_pid() AS pid")).rows[0]?.pid)

/**
 * True when connections from `open` go through a transaction-mode pooler.
 * Directly, a connection's startup key is its backend's pid, and keeps it.
 * Through a pooler the key is the pooler's own; then, on connection A read
 * the backend pid, open a transaction on connection B and read its pid, and
 * read A's again while B's transaction is open: in transaction mode A's pid
 * changes or B got A's former backend (a session-mode pooler pins them).
 */
export const throughTransactionPooler = async (open: () => Promise<Pg.Client>): Promise<boolean> => {
  const a = await open()
  try {
    const first = await backendPid(a)
    if ((a as unknown as { processID?: number }).processID === first) return false
    const b = await open()
    try {
      for (let round = 0; round < 3; round++) {
        const before = await backendPid(a)
        await b.query("BEGIN")
        try {
          const inTransaction = await backendPid(b)
          const after = await backendPid(a)
          if (after !== before || inTransaction === before) return true
        } finally {
          await b.query("ROLLBACK")
        }
      }
      return false
    } finally {
      await b.end().catch(() => undefined)
    }
  } finally {
    await a.end().catch(() => undefined)
  }
}
