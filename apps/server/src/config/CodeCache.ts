/**
 * The compiled code of `crm-relay serve`, kept between runs.
 *
 * Node keeps V8's code cache of every module it loads (the binary turns it
 * on), but makes it right after compiling, before the module runs: the
 * functions V8 compiles while the server starts, most of its code, are not
 * in it, and every start compiles them again (a fifth of the instructions
 * of a start). V8 can cache a script after it ran, with all it compiled, but
 * only a classic script, not an ES module. So the build bundles `serve` into
 * one script of its own (dist/serve.js), bin/crm-relay.js compiles it with
 * the cache a previous run saved and, when there was none or V8 refused it,
 * offers a function that saves a new one: `save` calls it once the server
 * has started and answered its first requests.
 */
import * as V8Flags from "@crm-relay/store/V8Flags"
import { Effect } from "effect"

/** Where bin/crm-relay.js puts its function that saves the cache (on `globalThis`), when it has one to save. */
const hook = Symbol.for("crm-relay.saveCodeCache")

/** Saves the compiled code, when the binary asked for it; once. Never fails: a cache it cannot write only costs the next start. */
export const save: Effect.Effect<void> = Effect.sync(() => {
  const global = globalThis as Record<symbol, unknown>
  const write = global[hook]
  delete global[hook]
  if (typeof write === "function") V8Flags.withDefaults(() => write())
})
