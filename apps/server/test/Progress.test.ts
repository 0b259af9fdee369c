import { describe, expect, it } from "@effect/vitest"
import { Console, Effect } from "effect"
import * as Progress from "../src/cli/Progress.js"

/** What `effect` writes to standard error through Console. */
const stderrOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const console = yield* Console.consoleWith(Effect.succeed)
    yield* Effect.withConsole(effect, { ...console, error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.join(" "))) })
    return lines
  })

describe("Progress", () => {
  it.effect("off a terminal: a plain line each time a tenth of the way is crossed, even when work moves in batches, and at the end", () =>
    Effect.gen(function*() {
      // 1200 secrets re-sealed 500 at a time: 0, 500, 1000, 1200.
      const batches = yield* stderrOf(Effect.forEach([[0, 0], [500, 500], [1000, 500], [1200, 200]] as const, ([done, advanced]) =>
        Progress.report("lines", "Re-encrypting secrets", done, 1200, advanced)))
      expect(batches).toEqual([
        "Re-encrypting secrets: 0/1200",
        "Re-encrypting secrets: 500/1200",
        "Re-encrypting secrets: 1000/1200",
        "Re-encrypting secrets: 1200/1200"
      ])
      // One at a time: every tenth only.
      const single = yield* stderrOf(Effect.forEach(Array.from({ length: 20 }, (_, i) => i + 1), (done) =>
        Progress.report("lines", "Replaying deliveries", done, 20)))
      expect(single).toEqual([2, 4, 6, 8, 10, 12, 14, 16, 18, 20].map((n) => `Replaying deliveries: ${n}/20`))
      expect(yield* stderrOf(Progress.report("none", "x", 1, 1))).toEqual([])
    }))
})
