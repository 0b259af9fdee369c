/**
 * Runs a benchmark's main effect: scoped (servers, schemas and clients are
 * released at the end), with the Reactivity the SQL client needs. A failure
 * is printed as its message (a defect in full) and sets the exit code.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { Cause, Console, Effect, Option, type Scope } from "effect"

const describe = (cause: Cause.Cause<unknown>): string =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => Cause.pretty(cause),
    onSome: (error) => (error instanceof Error ? error.message : String(error))
  })

/** Runs `main` (see the module comment). */
export const runMain = <E>(main: Effect.Effect<void, E, Scope.Scope | Reactivity.Reactivity>): Promise<void> =>
  Effect.runPromise(
    main.pipe(
      Effect.scoped,
      Effect.provide(Reactivity.layer),
      Effect.catchAllCause((cause) =>
        Effect.zipRight(
          Console.error(describe(cause)),
          Effect.sync(() => {
            process.exitCode = 1
          })
        )
      )
    )
  )
