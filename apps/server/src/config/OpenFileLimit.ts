/**
 * The process's open-file limit (`ulimit -n`, soft), which bounds every
 * socket, database connection and file the server holds at once. Read from
 * `/proc/self/limits` on Linux (no native addon needed); elsewhere, or when
 * unreadable, an assumed 1024 (the common default), said so at start.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"

/** Where the limit came from. */
export interface OpenFileLimit {
  /** The soft limit; `Infinity` when unlimited. */
  readonly limit: number
  readonly source: "/proc/self/limits" | "assumed"
}

/** The limit assumed when the system does not say. */
export const ASSUMED = 1024

/** Parses the "Max open files" line of a `/proc/<pid>/limits` text. */
export const parse = (limits: string): number | undefined => {
  const match = /^Max open files\s+(\S+)/m.exec(limits)
  if (match === null) return undefined
  if (match[1] === "unlimited") return Number.POSITIVE_INFINITY
  const value = Number(match[1])
  return Number.isInteger(value) && value > 0 ? value : undefined
}

/** This process's open-file limit. */
export const read: Effect.Effect<OpenFileLimit> = Effect.try(() => parse(Fs.readFileSync("/proc/self/limits", "utf8"))).pipe(
  Effect.map((limit): OpenFileLimit => limit === undefined ? { limit: ASSUMED, source: "assumed" } : { limit, source: "/proc/self/limits" }),
  Effect.orElseSucceed((): OpenFileLimit => ({ limit: ASSUMED, source: "assumed" }))
)
