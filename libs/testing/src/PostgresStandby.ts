/**
 * A throwaway PostgreSQL primary and a streaming standby of it, for one test
 * file: the primary `initdb`'d into a temporary folder (trust auth, which
 * also allows replication from loopback), the standby made from it with
 * `pg_basebackup -R`, each on a loopback port of its own with its Unix
 * socket in its own folder, never the system cluster. PostgreSQL refuses to
 * run as root, so when the tests run as root it runs as the `postgres` user
 * (`setpriv` execs without a fork: the PID held is the server's own).
 */
import { Duration, Effect } from "effect"
import type { Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as BrokerProcess from "./BrokerProcess.js"
import { BrokerUnavailable, type Child } from "./BrokerProcess.js"

/** One running server of the pair. */
export interface Server {
  readonly port: number
  /** `postgres://postgres@127.0.0.1:<port>/<database>` */
  readonly url: (database?: string) => string
}

export interface Pair {
  readonly primary: Server
  readonly standby: Server
}

const BIN_CANDIDATES = ["/usr/lib/postgresql/*/bin"]

const postgresIds = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) => Number(ChildProcess.execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim())
  return { uid: id("-u"), gid: id("-g") }
}

/** The server folder's programs (initdb and pg_basebackup are not on PATH on Debian). */
const binDir = Effect.map(
  BrokerProcess.findProgram("initdb", "postgresql", BIN_CANDIDATES.map((dir) => `${dir}/initdb`)),
  (initdb) => Path.dirname(initdb)
)

/** Starts the pair for the scope; fails with a sentence when PostgreSQL's server programs are missing. */
export const start = (): Effect.Effect<Pair, BrokerUnavailable, Scope.Scope> =>
  Effect.gen(function*() {
    const bin = yield* binDir
    const ids = postgresIds()
    const setpriv = ids === undefined ? undefined : yield* BrokerProcess.findProgram("setpriv", "util-linux")
    const asPostgres = (program: string, args: ReadonlyArray<string>): [string, ReadonlyArray<string>] =>
      setpriv === undefined
        ? [program, args]
        : [setpriv, ["--reuid=postgres", "--regid=postgres", "--init-groups", program, ...args]]
    const dir = yield* BrokerProcess.tempDir("crm-relay-pg-pair-")
    if (ids !== undefined) Fs.chownSync(dir, ids.uid, ids.gid)
    const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", LC_ALL: "C" }
    const run = (program: string, args: ReadonlyArray<string>) =>
      Effect.try({
        try: () => {
          const [command, argv] = asPostgres(Path.join(bin, program), args)
          ChildProcess.execFileSync(command, argv, { cwd: dir, env, stdio: "pipe" })
        },
        catch: (error) =>
          new BrokerUnavailable({
            message: `${program} failed: ${String((error as { stderr?: Buffer }).stderr ?? error).trim().slice(-500)}`
          })
      })

    const serve = (data: string) =>
      Effect.gen(function*() {
        const port = yield* BrokerProcess.freePort
        const [command, args] = asPostgres(Path.join(bin, "postgres"), [
          "-D",
          data,
          "-p",
          String(port),
          "-k",
          data,
          "-c",
          "listen_addresses=127.0.0.1",
          "-c",
          "fsync=off",
          "-c",
          "max_connections=40"
        ])
        const child: Child = yield* BrokerProcess.spawn(command, args, { env, cwd: dir })
        // SIGINT: a fast shutdown (SIGTERM would wait for every client to leave).
        yield* Effect.addFinalizer(() =>
          Effect.async<void>((resume) => {
            if (child.exited()) return resume(Effect.void)
            child.process.once("exit", () => resume(Effect.void))
            child.process.kill("SIGINT")
          }).pipe(Effect.timeout(Duration.seconds(30)), Effect.ignore)
        )
        const ready = Effect.sync(() => {
          try {
            ChildProcess.execFileSync(Path.join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port)], { stdio: "ignore" })
            return true
          } catch {
            return false
          }
        })
        yield* BrokerProcess.waitReady("postgres", child, ready)
        return { port, url: (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}` } satisfies Server
      })

    const primaryData = Path.join(dir, "primary")
    yield* run("initdb", ["-D", primaryData, "-A", "trust", "-U", "postgres", "--no-sync"])
    const primary = yield* serve(primaryData)
    const standbyData = Path.join(dir, "standby")
    yield* run("pg_basebackup", ["-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", standbyData, "-R", "-X", "stream"])
    const standby = yield* serve(standbyData)
    return { primary, standby }
  })
