/**
 * The V8 flags this process sets while it runs (the heap budget, PGlite's
 * baseline-only WebAssembly), in one place, so that code which must see
 * V8's flags as they were when the process started can.
 *
 * V8 accepts code it cached only under the flags it was cached with (it
 * hashes the flags that differ from their defaults). `crm-relay serve`
 * compiles its script at start, with the defaults, and saves the cache after
 * start, when these flags are set (apps/server config/CodeCache): it makes
 * the cache inside `withDefaults`.
 */
import * as V8 from "node:v8"

/** Each flag set, by name: as set, and as V8 has it by default (`node --v8-options`). */
const inForce = new Map<string, { readonly flag: string; readonly byDefault: string }>()

/** `--no-wasm-tier-up`, `--heap-growing-percent=50`: `wasm-tier-up`, `heap-growing-percent`. */
const nameOf = (flag: string): string => flag.replace(/^--(no-)?/, "").split("=")[0]!

/** Sets `flag` (`--name=value`, `--no-name`) for the rest of the process; `byDefault` is V8's own setting of it. */
export const set = (flag: string, byDefault: string): void => {
  V8.setFlagsFromString(flag)
  inForce.set(nameOf(flag), { flag, byDefault })
}

/**
 * Runs `f` with every flag `set` set back at V8's default, then sets them
 * again. Synchronous: nothing else runs in between.
 */
export const withDefaults = <A>(f: () => A): A => {
  const now = [...inForce.values()]
  for (const { byDefault } of now) V8.setFlagsFromString(byDefault)
  try {
    return f()
  } finally {
    for (const { flag } of now) V8.setFlagsFromString(flag)
  }
}
