/**
 * A replica's log file (its stdout and stderr together): where it ends now,
 * and the errors written after a given point, JSON log lines at level error
 * or fatal and anything else written on stderr (a crash's stack, a warning
 * of Node).
 */
import * as Fs from "node:fs"

/** The log's size in bytes now (0 when it does not exist yet). */
export const size = (file: string): number => (Fs.existsSync(file) ? Fs.statSync(file).size : 0)

const isError = (line: string): boolean => {
  try {
    const parsed = JSON.parse(line) as { level?: unknown }
    return parsed.level === "error" || parsed.level === "fatal"
  } catch {
    // Not a log line of the server: written on stderr.
    return true
  }
}

/** The errors written to `file` from byte `offset` on: their count and the first few. */
export const errorsAfter = (file: string, offset: number): { readonly count: number; readonly examples: ReadonlyArray<string> } => {
  const text = Fs.existsSync(file) ? Fs.readFileSync(file).subarray(offset).toString("utf8") : ""
  const errors = text.split("\n").filter((line) => line.trim() !== "" && isError(line))
  return { count: errors.length, examples: errors.slice(0, 5).map((line) => line.slice(0, 600)) }
}
