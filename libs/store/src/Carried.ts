/**
 * Files a single executable carries inside itself (crm-relay's release: Node
 * with the server and PGlite's WebAssembly and data as assets). Its launcher
 * sets a global before any of this code runs; a process from the source tree
 * or the build has none, and every file comes from disk as before.
 */

/** What the launcher puts on the global. */
export interface Executable {
  /** The bytes of a carried file (read-only; not a copy), or undefined. */
  readonly asset: (name: string) => ArrayBuffer | undefined
  /** Every carried file's name. */
  readonly names: () => ReadonlyArray<string>
  /** The release's own description (version, commit…). */
  readonly build: unknown
}

/** The global's key; the launcher uses the same `Symbol.for`. */
export const KEY = Symbol.for("crm-relay.executable")

/** The executable this process runs from, if it is one. */
export const executable = (): Executable | undefined =>
  (globalThis as { readonly [KEY]?: Executable })[KEY]

/** The carried files whose names start with `prefix`, by their name without it; undefined outside an executable. */
export const files = (prefix: string): ReadonlyMap<string, Uint8Array<ArrayBuffer>> | undefined => {
  const carrier = executable()
  if (carrier === undefined) return undefined
  const found = new Map<string, Uint8Array<ArrayBuffer>>()
  for (const name of carrier.names()) {
    const bytes = name.startsWith(prefix) ? carrier.asset(name) : undefined
    if (bytes !== undefined) found.set(name.slice(prefix.length), new Uint8Array(bytes))
  }
  return found
}
