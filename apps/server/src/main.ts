/**
 * Entry point of the `crm-relay` binary.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Exit, Option } from "effect"
import { AdminError, UsageError } from "./cli/AdminError.js"
import type * as Cli from "./cli/Cli.js"
import * as Logging from "./observability/Logging.js"

type Failure = Effect.Effect.Error<ReturnType<typeof Cli.run>>

/**
 * The command line, parsed by @effect/cli (cli/Cli) — except `crm-relay
 * serve` alone: it takes no options, so it runs without loading the parser
 * and the other commands (2 to 4 % of the instructions of the server's
 * start-up). Anything else (`serve --help`, `serve x`) goes through the
 * parser as before.
 */
const program = (argv: ReadonlyArray<string>): Effect.Effect<void, Failure> =>
  argv.length === 3 && argv[2] === "serve"
    ? Effect.flatMap(Effect.promise(() => import("./cli/Serve.js")), (serve) => serve.serve)
    : Effect.flatMap(Effect.promise(() => import("./cli/Cli.js")), (cli) => cli.run(argv))

/** One sentence for the operator; none when the CLI already printed it. */
const explain = (error: Failure): Option.Option<string> => {
  switch (error._tag) {
    // @effect/cli has printed its own usage errors.
    case "UsageError":
      return Option.none()
    case "AdminError":
    case "DataDirInUse":
    case "MasterKeyError":
    case "VaultError":
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
 * value, an unknown id: the operator's to fix); 1 anything else failed.
 */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  return Option.match(Cause.failureOption(exit.cause), {
    onNone: () => 1,
    onSome: (error) => error instanceof UsageError || (error instanceof AdminError && error.invalid === true) ? 2 : 1
  })
}

const main = program(process.argv).pipe(
  Effect.tapErrorCause((cause) =>
    Option.match(Cause.failureOption(cause), {
      onNone: () => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logFatal("crm-relay failed", cause)),
      onSome: (error) => Option.match(explain(error), { onNone: () => Effect.void, onSome: (text) => Console.error(text) })
    })
  ),
  Effect.provide(Logging.bootstrap)
)

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
whenClosed(process.stdout, true)
whenClosed(process.stderr, false)

NodeRuntime.runMain(main, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
