/**
 * The main script of the single executable (release.ts bundles it as one
 * CommonJS script; Node's single-executable support runs it). Everything
 * else comes out of the executable through `node:sea`: the server's two
 * scripts (dist/serve.js for `crm-relay serve`, dist/cli.js for every
 * command), the packages they load lazily (vendor/…), PGlite and its files,
 * the Integrations area's page. Nothing is read from disk or written
 * anywhere but DATA_DIR (the compiled code of `serve`, kept between starts
 * as bin/crm-relay.js keeps it in Node's compile cache). The compiled code
 * of cli.js is carried too, made when the release was (release.ts).
 */
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Path from "node:path"
import * as Sea from "node:sea"
import { debuglog } from "node:util"
import * as Vm from "node:vm"

/** Where the carried files seem to be, for the scripts' `import.meta.url` and their `require` of `vendor/…`. */
const ROOT = "/crm-relay/"
const debug = debuglog("crm-relay")

const assetNames = new Set(Sea.getAssetKeys())
const asset = (name: string): ArrayBuffer | undefined => (assetNames.has(name) ? Sea.getRawAsset(name) : undefined)
const text = (name: string): string => Sea.getAsset(name, "utf8")
// `id` names this release's code cache (a hash of its serve script, made by release.ts).
const build = JSON.parse(text("build.json")) as { readonly version: string; readonly commit: string; readonly dirty: boolean; readonly id: string }

// What the server's code reads the carried files from (libs/store/src/Carried.ts); set before any of it runs.
Object.assign(globalThis, { [Symbol.for("crm-relay.executable")]: { asset, names: () => [...assetNames], build } })

/** Packages the scripts require by name, and the carried CommonJS file each is. */
const packages: Readonly<Record<string, string>> = { "@electric-sql/pglite": "pglite/index.cjs", ws: "vendor/ws.cjs" }
const loaded = new Map<string, { exports: unknown }>()

/** `import()` of a built-in module (release.ts rewrites PGlite's to call this): the module, with itself as `default`. */
const builtinImport = (id: string): Promise<unknown> => {
  const module = require(id) as object
  return Promise.resolve(Object.assign(Object.create(module) as object, { default: module }))
}

/** `require` for the carried scripts: Node's built-in modules, or a carried CommonJS file; never a file on disk. */
const carriedRequire = (id: string): unknown => {
  if (Module.isBuiltin(id)) return require(id)
  const name = packages[id] ?? (id.startsWith(ROOT) ? id.slice(ROOT.length) : undefined)
  const source = name !== undefined && assetNames.has(name) ? name : undefined
  if (source === undefined) {
    // As Node's own `require` fails, so that code probing for an optional package (pg-native) goes on without it.
    throw Object.assign(new Error(`Cannot find module '${id}' (the executable carries no such file)`), { code: "MODULE_NOT_FOUND" })
  }
  const cached = loaded.get(source)
  if (cached !== undefined) return cached.exports
  const module = { exports: {} }
  loaded.set(source, module)
  const file = `${ROOT}${source}`
  const wrapper = new Vm.Script(`(function (exports, require, module, __filename, __dirname, __crmRelayImport) {${text(source)}\n})`, { filename: file })
  ;(wrapper.runInThisContext() as (...args: ReadonlyArray<unknown>) => void)(module.exports, carriedRequire, module, file, Path.dirname(file), builtinImport)
  return module.exports
}

/**
 * The compiled code of `serve`, as bin/crm-relay.js keeps it: read when it is the user's own and
 * nobody else may write it; a missing or refused cache costs only the time to compile.
 */
const cacheFile = Path.resolve(process.env["DATA_DIR"] ?? "./.data", "code-cache", `serve-${build.id}-${process.version}-${process.arch}.v8`)
const ownCache = (): Buffer | undefined => {
  let fd: number
  try {
    fd = Fs.openSync(cacheFile, "r")
  } catch {
    return undefined
  }
  try {
    const { uid, mode } = Fs.fstatSync(fd)
    return uid === process.getuid?.() && (mode & 0o022) === 0 ? Fs.readFileSync(fd) : undefined
  } catch {
    return undefined
  } finally {
    Fs.closeSync(fd)
  }
}

/**
 * Where the release's first, unshipped executable writes the compiled code of
 * cli.js once the command it ran (`--help`) is done; release.ts sets it when
 * it bundles that executable, and leaves it undefined (the code gone) in the
 * one it ships.
 */
declare const CLI_CODE_CACHE_OUT: string | undefined

/**
 * The compiled code of cli.js the release made (cli.js.v8, see release.ts):
 * V8 checks it against its version, its flags and the script, and refuses
 * one that does not match (a NODE_OPTIONS with another V8 flag); the command
 * then only compiles as it would without.
 */
const CLI_CACHE = "cli.js.v8"

/** Runs one of the server's scripts (a function of `require` and its `import.meta.url`). */
const runScript = (name: string, cached: boolean): void => {
  const carried = !cached && assetNames.has(CLI_CACHE) ? Buffer.from(Sea.getRawAsset(CLI_CACHE)) : undefined
  const cachedData = cached ? ownCache() : carried
  const script = new Vm.Script(text(name), { filename: `${ROOT}${name}`, cachedData })
  const accepted = cachedData !== undefined && !script.cachedDataRejected
  debug("code cache %s: %s", cached ? cacheFile : CLI_CACHE, accepted ? "accepted" : cachedData === undefined ? "none" : "refused")
  if (typeof CLI_CODE_CACHE_OUT === "string" && !cached) {
    const out = CLI_CODE_CACHE_OUT
    process.on("exit", () => Fs.writeFileSync(out, script.createCachedData()))
  }
  if (cached && !accepted) {
    // Called by the server a second after start (src/config/CodeCache.ts).
    Object.assign(globalThis, {
      [Symbol.for("crm-relay.saveCodeCache")]: () => {
        try {
          Fs.mkdirSync(Path.dirname(cacheFile), { recursive: true, mode: 0o700 })
          const staged = `${cacheFile}.${process.pid}.tmp`
          Fs.writeFileSync(staged, script.createCachedData(), { mode: 0o600 })
          Fs.renameSync(staged, cacheFile)
          // Earlier releases' caches.
          for (const old of Fs.readdirSync(Path.dirname(cacheFile))) {
            if (old.startsWith("serve-") && Path.join(Path.dirname(cacheFile), old) !== cacheFile) Fs.rmSync(Path.join(Path.dirname(cacheFile), old), { force: true })
          }
          debug("code cache %s: saved", cacheFile)
        } catch (error) {
          debug("code cache %s: not saved (%s)", cacheFile, error)
        }
      }
    })
  }
  ;(script.runInThisContext() as (require: unknown, url: string) => void)(carriedRequire, `file://${ROOT}${name}`)
}

const serveAlone = process.argv.length === 3 && process.argv[2] === "serve"
runScript(serveAlone ? "serve.js" : "cli.js", serveAlone)
