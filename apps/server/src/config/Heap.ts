/**
 * The server's memory budget: how far V8 lets its heap grow under load.
 *
 * Left to itself on a machine with memory to spare, V8 grows the young
 * generation (two semi-spaces) up to 2 × 64 MiB under sustained load and
 * keeps it, and lets the old generation grow to up to four times what
 * survived its last full collection: a server whose live data is ~20 MiB
 * peaked at 320 MiB RSS under the Event API bench. `bound` holds both to
 * the settings (defaults 8 MiB and 100 %: 170 MiB in the same bench):
 *
 * - HEAP_SEMI_SPACE_MIB: V8 grows the young generation by doubling it
 *   (`--semi-space-growth-factor`, read at every growth); after each
 *   collection the growth factor is set to 1 once the next doubling would
 *   pass the bound, and back to 2 when V8 has shrunk it (idle, or the
 *   collection after start). `--max-semi-space-size` would say it once, but
 *   only on Node's command line, where `node bin/crm-relay.js` or a
 *   supervisor may not put it.
 * - HEAP_GROWTH_PERCENT: the old generation grows by that share of what
 *   survived the last full collection before the next one
 *   (`--heap-growing-percent`, read at every collection), as Go's GOGC.
 *
 * Flags given to Node itself win: `--max-semi-space-size` (on its command
 * line or in NODE_OPTIONS) and `--heap-growing-percent` (command line only:
 * NODE_OPTIONS refuses it) leave their bound alone.
 *
 * Start-up allocates fast (modules, Schemas, Layers) and leaves the young
 * generation large and mostly empty; `release`, run a second after start,
 * is one full, memory-reducing collection that hands it back.
 */
import * as V8Flags from "@crm-relay/store/V8Flags"
import { Duration, Effect } from "effect"
import { PerformanceObserver } from "node:perf_hooks"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

/** The two bounds (0: V8's own heuristics). */
export interface Budget {
  /** Largest semi-space, in MiB (the young generation holds two). */
  readonly semiSpaceMiB: number
  /** Old-generation growth between full collections, in percent of what survived. */
  readonly growthPercent: number
}

/** Whether Node was started with `flag` (on its command line or in NODE_OPTIONS). */
const givenToNode = (flag: string): boolean => {
  const given = (option: string) => {
    const name = option.split("=")[0]!.replaceAll("_", "-")
    return name === flag
  }
  return process.execArgv.some(given) || (process.env["NODE_OPTIONS"] ?? "").split(/\s+/).some(given)
}

/** Bytes of the young generation V8 has now (both semi-spaces). */
export const youngGenerationBytes = (): number => V8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.space_size ?? 0

/** What `bound` applied, for the start-up log: the bounds in force, and which ones Node's own flags set. */
export interface Applied {
  readonly semiSpaceMiB: number | "node"
  readonly growthPercent: number | "node"
}

let observer: PerformanceObserver | undefined

/** V8's own settings of the flags `bound` sets (`node --v8-options`), for V8Flags. */
const byDefault = { growth: "--heap-growing-percent=0", semiSpaceGrowth: "--semi-space-growth-factor=2" } as const

/**
 * Holds the heap to `budget` from now on (see the module comment); a second
 * call replaces the first. Synchronous and cheap: one check after each
 * garbage collection, a flag write only when the decision changes.
 */
export const bound = (budget: Budget): Effect.Effect<Applied> =>
  Effect.sync(() => {
    observer?.disconnect()
    observer = undefined
    const growthByNode = givenToNode("--heap-growing-percent")
    if (!growthByNode) V8Flags.set(`--heap-growing-percent=${budget.growthPercent}`, byDefault.growth)
    const semiByNode = givenToNode("--max-semi-space-size")
    if (!semiByNode) {
      V8Flags.set("--semi-space-growth-factor=2", byDefault.semiSpaceGrowth)
      if (budget.semiSpaceMiB > 0) {
        // Both semi-spaces: the young generation's size as V8 reports it.
        const most = 2 * budget.semiSpaceMiB * 1024 * 1024
        let factor = 2
        const decide = () => {
          const next = youngGenerationBytes() * 2 <= most ? 2 : 1
          if (next !== factor) {
            factor = next
            V8Flags.set(`--semi-space-growth-factor=${next}`, byDefault.semiSpaceGrowth)
          }
        }
        decide()
        observer = new PerformanceObserver(decide)
        observer.observe({ entryTypes: ["gc"] })
      }
    }
    return {
      semiSpaceMiB: semiByNode ? "node" : budget.semiSpaceMiB,
      growthPercent: growthByNode ? "node" : budget.growthPercent
    }
  })

interface GcOptions {
  readonly type: "major"
  readonly execution: "sync"
  /** "last-resort": the collection that also shrinks the young generation. */
  readonly flavor: "last-resort"
}
type Gc = (options: GcOptions) => void

/** V8's `gc` function, exposed to a fresh context only (the process's own global keeps none). */
const gcFunction = (): Gc => {
  const exposed = (globalThis as { gc?: Gc }).gc
  if (exposed !== undefined) return exposed
  V8.setFlagsFromString("--expose-gc")
  try {
    return Vm.runInNewContext("gc") as Gc
  } finally {
    V8.setFlagsFromString("--no-expose-gc")
  }
}

/** How long after start the collection runs: after the first requests a supervisor sends. */
export const delay = Duration.seconds(1)

/** One full, memory-reducing collection (see the module comment): run it `delay` after start. */
export const release: Effect.Effect<void> = Effect.sync(() => gcFunction()({ type: "major", execution: "sync", flavor: "last-resort" }))
