/**
 * Progress of long work (replaying many deliveries, re-encrypting secrets): a bar redrawn in place
 * on stderr when it is a terminal, a plain line every tenth of the way when
 * it is not, nothing with `--json` (scripts read the final JSON line).
 */
import { Console, Effect } from "effect"

/** How progress is shown. */
export type Mode = "bar" | "lines" | "none"

/** The mode for this process: `none` with --json, a bar only on a terminal. */
export const mode = (asJson: boolean): Mode => (asJson ? "none" : process.stderr.isTTY === true ? "bar" : "lines")

const WIDTH = 30

/** The bar for `done` of `total`. */
export const bar = (done: number, total: number): string => {
  const filled = total === 0 ? WIDTH : Math.round((done / total) * WIDTH)
  return `[${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${done}/${total}`
}

/**
 * Reports that `done` of `total` items of `what` are through, `advanced`
 * of them since the last report (work done in batches moves by more than one).
 */
export const report = (mode: Mode, what: string, done: number, total: number, advanced = 1): Effect.Effect<void> => {
  switch (mode) {
    case "none":
      return Effect.void
    case "bar":
      return Effect.sync(() => {
        process.stderr.write(`\r${what} ${bar(done, total)}${done === total ? "\n" : ""}`)
      })
    case "lines": {
      const step = Math.max(1, Math.ceil(total / 10))
      // A line each time a tenth of the way is crossed, and at the end.
      const crossed = Math.floor(done / step) > Math.floor((done - Math.max(1, advanced)) / step)
      return done === total || crossed ? Console.error(`${what}: ${done}/${total}`) : Effect.void
    }
  }
}
