/**
 * How the `crm-relay` binary runs a program and ends: one sentence for the
 * operator on stderr when it fails, an exit code that says whose the mistake
 * was, and output streams whose reader may go away. Shared by the binary's
 * two entry points: `main` (every command) and `serve` (the server alone,
 * the script the binary caches the compiled code of; see bin/crm-relay.js).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Exit, Option, Predicate } from "effect"
import { AdminError, UsageError } from "./cli/AdminError.js"
import type * as Cli from "./cli/Cli.js"
import * as Logging from "./observability/Logging.js"

/** Whatever a command can fail with. */
export type Failure = Effect.Effect.Error<ReturnType<typeof Cli.run>>

/** One sentence for the operator; none when the CLI already printed it. */
const explain = (error: Failure): Option.Option<string> => {
  switch (error._tag) {
    // @effect/cli has printed its own usage errors.
    case "UsageError":
      return Option.none()
    case "AdminError":
    case "DataDirInUse":
    case "DataDirError":
    case "AdminTokenRequired":
    case "MasterKeyError":
    case "VaultError":
    case "UnknownMigrations":
    case "DatabaseRefused":
      return Option.some(error.message)
    case "ServeError":
      return Option.some(`Could not listen: ${error.cause instanceof Error ? error.cause.message : String(error.cause)}.`)
    case "SqlError":
      return Option.some(`The database failed: ${error.cause instanceof Error ? error.cause.message : error.message}.`)
    case "MigrationError":
      return Option.some(`Migrations failed: ${error.message}`)
    default:
      return Option.some(`Invalid configuration: ${String(error)}`)
  }
}

/**
 * Exit codes: 0 done; 2 the request was refused (a usage error, an invalid
 * value, an unknown id, a database a newer release migrated, a DATABASE_URL
 * that names several hosts or reaches a standby: the operator's
 * to fix); 1 anything else failed.
 */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  return Option.match(Cause.failureOption(exit.cause), {
    onNone: () => 1,
    onSome: (error) =>
      // By tag: main.js loads no part of the store before a command runs.
      error instanceof UsageError || Predicate.isTagged(error, "UnknownMigrations") || Predicate.isTagged(error, "DatabaseRefused") ||
        (error instanceof AdminError && error.invalid === true)
        ? 2
        : 1
  })
}

/**
 * When the reader of an output stream goes away (`crm-relay serve | head`, a log shipper that
 * exited), writes to it fail with EPIPE, and Node would crash on the unhandled stream error.
 * Instead a closed stdout stops the process as SIGTERM does (the server finishes its requests and
 * gives its jobs back), saying so on stderr; a closed stderr is only written to no more. What was
 * left to write to a closed stream is dropped.
 */
const whenClosed = (stream: NodeJS.WriteStream, stop: boolean): void => {
  let closed = false
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE" && error.code !== "ERR_STREAM_DESTROYED") throw error
    if (closed) return
    closed = true
    if (!stop) return
    if (!process.stderr.destroyed) process.stderr.write("crm-relay: standard output was closed (its reader went away): stopping.\n")
    process.kill(process.pid, "SIGTERM")
  })
}
/** Runs `program` as the process's main program: exits when it ends, with exitCode's code. */
export const run = (program: Effect.Effect<void, Failure>): void => {
  whenClosed(process.stdout, true)
  whenClosed(process.stderr, false)
  const main = program.pipe(
    Effect.tapErrorCause((cause) =>
      Option.match(Cause.failureOption(cause), {
        onNone: () => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logFatal("crm-relay failed", cause)),
        onSome: (error) => Option.match(explain(error), { onNone: () => Effect.void, onSome: (text) => Console.error(text) })
      })
    ),
    Effect.provide(Logging.bootstrap)
  )
  NodeRuntime.runMain(main, {
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit, onExit) => onExit(exitCode(exit))
  })
}
