/**
 * DATA_DIR must be a directory this user can write before `serve` starts:
 * the embedded database, the generated admin token and the compiled code
 * live there. Checked first, so that the operator reads one sentence naming
 * the directory instead of the first write's stack trace.
 */
import { Data, Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** DATA_DIR cannot be created or written. */
export class DataDirError extends Data.TaggedError("DataDirError")<{ readonly dataDir: string; readonly code: string }> {
  override get message() {
    const user = process.getuid === undefined ? "this user" : `this user (uid ${process.getuid()})`
    return `DATA_DIR ${this.dataDir} cannot be written by ${user} (${this.code}): make it a directory it owns, or set DATA_DIR to one.`
  }
}

/** Creates DATA_DIR when missing and checks that it can be written. */
export const ensureWritable = (dataDir: string): Effect.Effect<void, DataDirError> =>
  Effect.try({
    try: () => {
      Fs.mkdirSync(dataDir, { recursive: true })
      Fs.accessSync(dataDir, Fs.constants.W_OK | Fs.constants.X_OK)
    },
    catch: (error) => new DataDirError({ dataDir: Path.resolve(dataDir), code: (error as NodeJS.ErrnoException).code ?? String(error) })
  })
