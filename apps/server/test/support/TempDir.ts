/**
 * A fresh temporary directory for the scope (a DATA_DIR, a CA file), removed
 * with everything in it at the end.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** A new directory under the system's temporary directory, named `prefix` + random characters. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
