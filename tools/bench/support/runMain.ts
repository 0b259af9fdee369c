/**
 * Runs a benchmark's main effect: scoped (servers, schemas and clients are
 * released at the end), with the Reactivity the SQL client needs. A failure
 * is printed as its message (a defect in full) and sets the exit code.
 * Ctrl-C (SIGINT) or SIGTERM interrupts it, so its servers are stopped and
 * its schemas and folders removed before the process exits.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { Cause, Console, Effect, Fiber, Option, type Scope } from "effect"

const describe = (cause: Cause.Cause<unknown>): string =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => Cause.pretty(cause),
    onSome: (error) => (error instanceof Error ? error.message : String(error))
  })

/** Runs `main` (see the module comment). */
export const runMain = <E>(main: Effect.Effect<void, E, Scope.Scope | Reactivity.Reactivity>): Promise<void> => {
  const fiber = Effect.runFork(
    main.pipe(
      Effect.scoped,
      Effect.provide(Reactivity.layer),
      Effect.catchAllCause((cause) =>
        // An interruption is the signal's doing: said once below, not as a failure.
        Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(
          Console.error(describe(cause)),
          Effect.sync(() => {
            process.exitCode = 1
          })
        )
      )
    )
  )
  const stop = (signal: NodeJS.Signals) => {
    process.stderr.write(`${signal}: stopping the servers and removing what the run created…\n`)
    process.exitCode = 130
    // A second signal while the clean-up runs ends the process at once (Node's default).
    for (const s of ["SIGINT", "SIGTERM"] as const) process.off(s, stop)
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  return new Promise((resolve) =>
    fiber.addObserver(() => {
      process.off("SIGINT", stop)
      process.off("SIGTERM", stop)
      resolve()
    })
  )
}
