/**
 * Loaded by a test into a `crm-relay serve` child, before anything else
 * (`NODE_OPTIONS=--import <this file>`; Node strips its types): after the
 * child gets SIGUSR2, the embedded database's next file write aborts the way
 * PostgreSQL's `abort()` does on a PANIC, through Emscripten's own
 * `_abort_js`, from inside the statement being executed. A real trap of
 * PGlite's WebAssembly instance, mid-write; nothing of it is in the product.
 */

/** What a WebAssembly import object looks like here. */
type Imports = Record<string, Record<string, unknown> | undefined>

let armed = false
process.on("SIGUSR2", () => {
  armed = true
})

type Instantiate = (source: unknown, imports?: Imports) => Promise<unknown>
// The global object (the configuration's libraries declare WebAssembly's types only).
const wasm = (globalThis as unknown as { readonly WebAssembly: { instantiate: Instantiate } }).WebAssembly
const instantiate = wasm.instantiate.bind(wasm)

const aborting = (imports: Imports | undefined): void => {
  // Emscripten hands PostgreSQL one object of imports as `env` and as `wasi_snapshot_preview1`.
  const env = imports?.["env"]
  const write = env?.["fd_pwrite"]
  const abort = env?.["_abort_js"]
  if (env === undefined || typeof write !== "function" || typeof abort !== "function") return
  env["fd_pwrite"] = (...args: Array<unknown>): unknown => {
    if (armed) {
      armed = false
      abort()
    }
    return write(...args)
  }
}

wasm.instantiate = (source, imports) => {
  aborting(imports)
  return instantiate(source, imports)
}
