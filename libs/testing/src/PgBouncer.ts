/**
 * A private PgBouncer (Debian's `pgbouncer`) in transaction pool mode for one
 * test file, in front of a given PostgreSQL: its own loopback port, config,
 * auth file and no Unix socket, under a temporary folder, never the system
 * copy on 6432. PgBouncer refuses to run as root, so when the tests run as
 * root it runs as the `postgres` user (`setpriv` execs without a fork: the
 * PID held is PgBouncer's own), in the foreground. Ready when it answers an
 * SSLRequest, a protocol-level probe.
 *
 * A transaction pooler hands each transaction whichever server connection is
 * free, so a session's `SET search_path` does not stick. Each database entry
 * may name a `searchPath` instead: PgBouncer sets it on every server
 * connection it opens for that entry (`connect_query`), so a test's schema
 * holds for every transaction through the entry. libpq's `options` startup
 * parameter (how `TestDatabase.withSearchPath` names a schema) is refused by
 * PgBouncer 1.18; it is deliberately not ignored, so a URL relying on it fails
 * loudly rather than running in the wrong schema.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as BrokerProcess from "./BrokerProcess.js"
import { BrokerUnavailable, type Child } from "./BrokerProcess.js"

/** One database PgBouncer serves: clients connect to `name`, PgBouncer to `dbname` on the PostgreSQL. */
export interface Database {
  /** The database name on the PostgreSQL (default: the entry's name). */
  readonly dbname?: string
  /** A schema set as `search_path` on every server connection of this entry. */
  readonly searchPath?: string
}

export interface Options {
  /** The PostgreSQL behind it (default 127.0.0.1:5432); reached as `user`, which it must trust. */
  readonly host?: string
  readonly port?: number
  /** The one user clients and PgBouncer log in as (default `postgres`). */
  readonly user?: string
  /** The databases served, by the name clients use (default: `test` and `postgres`, as they are). */
  readonly databases?: Readonly<Record<string, Database>>
  /** Server connections per database and user (default 20). */
  readonly poolSize?: number
}

/** A running private PgBouncer in transaction pool mode. */
export interface PgBouncer {
  readonly port: number
  /** `postgres://<user>@127.0.0.1:<port>/<database>`: a client URL through the pooler. */
  readonly url: (database: string) => string
  /** Stops PgBouncer (SIGTERM: immediate shutdown, clients are disconnected). */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and config; waits until it is ready. */
  readonly start: Effect.Effect<void, BrokerUnavailable>
}

// An SSLRequest: length 8, code 80877103. Any PostgreSQL-speaking server answers one byte, 'N' or 'S'.
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
const sslAnswer = (received: Buffer) => (received.length < 1 ? undefined : received[0] === 0x4e || received[0] === 0x53)

const quote = (value: string) => `'${value.replace(/'/g, "''")}'`
const identifier = (value: string) => `"${value.replace(/"/g, "\"\"")}"`

/** The uid and gid of the `postgres` user, when this process is root (otherwise PgBouncer runs as this user). */
const postgresUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) => Number(ChildProcess.execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim())
  try {
    return { uid: id("-u"), gid: id("-g") }
  } catch {
    return undefined
  }
}

/** Starts a private PgBouncer for the scope; fails with a sentence naming the package when it is not installed. */
export const start = (options: Options = {}): Effect.Effect<PgBouncer, BrokerUnavailable, Scope.Scope> =>
  Effect.gen(function*() {
    const program = yield* BrokerProcess.findProgram("pgbouncer", "pgbouncer")
    const runAs = postgresUser()
    if (process.getuid?.() === 0 && runAs === undefined) {
      return yield* new BrokerUnavailable({
        message: "PgBouncer refuses to run as root and there is no postgres user to run it as: install the Debian package postgresql."
      })
    }
    const setpriv = runAs === undefined ? undefined : yield* BrokerProcess.findProgram("setpriv", "util-linux")
    const dir = yield* BrokerProcess.tempDir("crm-relay-pgbouncer-")
    const port = yield* BrokerProcess.freePort
    const user = options.user ?? "postgres"
    const host = options.host ?? "127.0.0.1"
    const serverPort = options.port ?? 5432
    const databases = options.databases ?? { test: {}, postgres: {} }
    const entries = Object.entries(databases).map(([name, db]) => {
      const parts = [`host=${host}`, `port=${serverPort}`, `dbname=${db.dbname ?? name}`, `user=${user}`]
      if (db.searchPath !== undefined) parts.push(`connect_query=${quote(`SET search_path TO ${identifier(db.searchPath)}`)}`)
      return `${name} = ${parts.join(" ")}`
    })
    const config = Path.join(dir, "pgbouncer.ini")
    Fs.writeFileSync(Path.join(dir, "users.txt"), `"${user}" ""\n`)
    Fs.writeFileSync(
      config,
      [
        "[databases]",
        ...entries,
        "",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${port}`,
        // No Unix socket: only the loopback port above.
        "unix_socket_dir =",
        "auth_type = trust",
        `auth_file = ${Path.join(dir, "users.txt")}`,
        "pool_mode = transaction",
        `default_pool_size = ${options.poolSize ?? 20}`,
        "max_client_conn = 1000",
        // Parameters clients send that PgBouncer 1.18 does not track; `options` is left out on purpose (see above).
        "ignore_startup_parameters = extra_float_digits",
        // Logs go to stderr (kept for error messages); no per-connection chatter.
        "log_connections = 0",
        "log_disconnections = 0",
        "log_pooler_errors = 1"
      ].join("\n") + "\n"
    )
    if (runAs !== undefined) {
      for (const file of [dir, config, Path.join(dir, "users.txt")]) Fs.chownSync(file, runAs.uid, runAs.gid)
    }
    const [command, args] = setpriv === undefined
      ? [program, [config]]
      : [setpriv, ["--reuid=postgres", "--regid=postgres", "--init-groups", program, config]]

    let current: Child | undefined
    const stop = Effect.suspend(() => {
      const child = current
      current = undefined
      return child === undefined ? Effect.void : BrokerProcess.stop(child)
    })
    const startServer = Effect.gen(function*() {
      if (current !== undefined && !current.exited()) return
      const child = yield* BrokerProcess.spawn(command, args, { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, cwd: dir })
      current = child
      yield* BrokerProcess.waitReady("pgbouncer", child, BrokerProcess.exchange(port, SSL_REQUEST, sslAnswer))
    })
    yield* Effect.addFinalizer(() => stop)
    yield* startServer
    return {
      port,
      url: (database: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
      stop,
      start: startServer
    } satisfies PgBouncer
  })
