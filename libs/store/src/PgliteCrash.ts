/**
 * When PGlite's WebAssembly instance crashes, the process ends at once, with
 * exit code 1 and one fatal log line, so that its supervisor (systemd, the
 * container runtime) starts it again.
 *
 * A crash is a trap of the instance: PostgreSQL's `abort()` (a PANIC, a failed
 * assertion), `unreachable`, an access out of bounds, the native stack
 * exhausted. PGlite swallows a trap inside its statement loop: the statement
 * in flight answers as if it had returned no rows, and a later one spins that
 * loop forever, blocking the event loop (`/healthz` would hang, the process
 * would look alive). The instance's memory (dirty pages, locks, the
 * transaction in flight) cannot be trusted either, and closing it would write
 * them. So no statement answers after a trap: the process exits inside it,
 * as a kill would, and the next start recovers the database from its
 * write-ahead log, as after SIGKILL: every commit is kept, and the job
 * runners take back the dead process's leases at once.
 */
import type { Extension } from "@electric-sql/pglite"
import { Cause, Effect, Runtime } from "effect"

/** The status PGlite's loop throws for PostgreSQL's own error handling (its `POSTGRES_MAIN_LONGJMP`): not a crash. */
const POSTGRES_MAIN_LONGJMP = 100

/** Emscripten's `ExitStatus` of PostgreSQL's error handling, which PGlite catches and handles. */
const isErrorHandling = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "status" in error && error.status === POSTGRES_MAIN_LONGJMP

/** The entry points PGlite calls into the instance for every statement. */
const STATEMENT_ENTRIES = ["_PostgresMainLoopOnce", "_PostgresMainLongJmp", "_PostgresSendReadyForQueryIfNecessary", "_pgl_pq_flush"]

/**
 * A PGlite extension that calls `onCrash` at the instance's first trap once
 * the database is open (a failure while opening is `PGlite.create`'s own):
 * through Emscripten's `onAbort`, and around the statement entry points for
 * the traps that do not abort. `onCrash` runs inside the trap and should not
 * return (PGlite would go on).
 */
export const watch = (onCrash: (error: unknown) => void): Extension => ({
  name: "crashWatch",
  setup: async (_pglite, emscriptenOpts: Record<string, unknown>) => {
    let armed = false
    const crashed = (error: unknown) => {
      if (!armed) return
      armed = false
      onCrash(error)
    }
    // The options object becomes Emscripten's module: its exports land on it.
    const module = Object.assign(emscriptenOpts, {
      onAbort: (what: unknown) => crashed(new Error(`Aborted(${String(what)})`))
    })
    return {
      emscriptenOpts: module,
      init: async () => {
        for (const name of STATEMENT_ENTRIES) {
          const entry = module[name]
          if (typeof entry !== "function") continue
          module[name] = (...args: ReadonlyArray<unknown>): unknown => {
            try {
              return entry(...args)
            } catch (error) {
              if (!(name === "_PostgresMainLoopOnce" && isErrorHandling(error))) crashed(error)
              throw error
            }
          }
        }
        armed = true
      }
    }
  }
})

/**
 * The extension that ends this process at a crash (see the module comment),
 * logging through the logger of the fiber that opens the database.
 */
export const exitOnCrash: Effect.Effect<Extension> = Effect.map(Effect.runtime<never>(), (runtime) =>
  watch((error) => {
    Runtime.runSync(runtime)(
      Effect.logFatal(
        "The embedded database crashed (its WebAssembly instance trapped): exiting with code 1 for the supervisor to " +
          "start the server again, which recovers the database and takes back this run's jobs",
        Cause.die(error)
      )
    )
    // Synchronous on purpose: nothing may run on this instance after the trap, not even the statement in flight.
    process.exit(1)
  }))
