/**
 * The one error of the CLI's operations: a sentence for the operator, the
 * same whether the command ran on the database or through a running server.
 */
import { Data } from "effect"

/** A command failed; `message` is one sentence for the operator. */
export class AdminError extends Data.TaggedError("AdminError")<{ readonly message: string }> {}

/** No account has the id `id`. */
export const unknownAccount = (id: string): AdminError => new AdminError({ message: `No account with id ${id} exists.` })

/** The database (or building the services over it) failed with `error`. */
export const databaseFailure = (error: unknown): AdminError =>
  new AdminError({ message: `The database failed: ${error instanceof Error ? error.message : String(error)}.` })
