/**
 * The one error of the CLI's operations: a sentence for the operator, the
 * same whether the command ran on the database or through a running server.
 * `invalid` marks a refusal of what was asked (a value, an unknown id, a
 * state that does not allow it): the command exits 2; any other failure
 * (the database, the network, a bridge) exits 1.
 */
import { Data } from "effect"

/** A command failed; `message` is one sentence for the operator. */
export class AdminError extends Data.TaggedError("AdminError")<{
  readonly message: string
  /** True when the request itself was refused (exit code 2). */
  readonly invalid?: boolean
}> {}

/**
 * The command line was refused (an unknown option, a missing or invalid
 * value): @effect/cli has printed why, with the usage. Exit code 2.
 */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly cause: unknown }> {}

/** The request was refused because of what it asked: exit code 2. */
export const refused = (message: string): AdminError => new AdminError({ message, invalid: true })

/** No account has the id `id`. */
export const unknownAccount = (id: string): AdminError => refused(`No account with id ${id} exists.`)

/** The database (or building the services over it) failed with `error`. */
export const databaseFailure = (error: unknown): AdminError =>
  new AdminError({ message: `The database failed: ${error instanceof Error ? error.message : String(error)}.` })
