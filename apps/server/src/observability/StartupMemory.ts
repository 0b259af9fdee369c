/**
 * Start-up allocates fast (modules, Schemas, Layers), so V8 grows its young
 * generation to the maximum (32 MiB) and then keeps it, mostly empty, for
 * as long as the server lives: about a quarter of an idle server's RSS.
 * Once the server is up and the start-up burst is over, one full,
 * memory-reducing collection hands it back; V8 grows it again under load.
 */
import { Duration, Effect } from "effect"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

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

/** Collects once, `delay` after it is run, in a daemon fiber; returns at once. */
export const releaseAfterStart: Effect.Effect<void> = Effect.sync(() => gcFunction()({ type: "major", execution: "sync", flavor: "last-resort" })).pipe(
  Effect.delay(delay),
  Effect.withSpan("StartupMemory.release"),
  Effect.forkDaemon,
  Effect.asVoid
)
