/**
 * The production artifact of the `crm-relay` binary: `src/main.ts` and every
 * workspace library it imports, bundled by esbuild into `dist/` as ESM with
 * source maps. Each command's code sits behind a dynamic `import()`, so with
 * `splitting` a command loads only its own chunks (`--help` loads no
 * database driver and no HTTP server). PGlite stays external: it finds its
 * WebAssembly and data files next to its own module, and it is imported only
 * when the embedded database opens. `crm-relay serve` alone runs a build of
 * its own, `dist/serve.js`: one script, whose compiled code the binary keeps
 * between runs (see serveScript); `dist/cli.js` is every command as one such
 * script, for the single executable (release.ts).
 *
 * The build replaces `dist/` in place, file by file (each written beside
 * itself, then renamed over), entry point last, and removes stale files at
 * the end: a `crm-relay` process started from the previous build keeps
 * finding the chunks it loads lazily while a new build runs (the tests run
 * the binary while the demo and README tests build it again). The
 * Integrations area's page (`apps/portal/dist`, which Nx builds first) is
 * copied into `dist/portal`, where `crm-relay serve` serves it from.
 *
 *   npx nx run @crm-relay/server:build      (cached by Nx; what `npm start` and the tests use)
 *   node build.ts                           (the same, uncached, from apps/server)
 */
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Path from "node:path"

const root = import.meta.dirname
const outdir = Path.join(root, "dist")

/**
 * Packages whose index only re-exports their modules (`export * as Effect
 * from "./Effect.js"`), and the few plain functions `effect` re-exports too.
 */
const barrels = ["effect", "@effect/platform", "@effect/cli", "@effect/sql"]
const barrelFunctions: Record<string, string> = {
  absurd: "effect/Function",
  flow: "effect/Function",
  hole: "effect/Function",
  identity: "effect/Function",
  pipe: "effect/Function",
  unsafeCoerce: "effect/Function"
}
const barrelImport = new RegExp(`import\\s*\\{([^}]*)\\}\\s*from\\s*"(${barrels.join("|")})"`, "g")

/**
 * `import { Effect, Layer } from "effect"` becomes `import * as Effect from
 * "effect/Effect"; ...`. With `splitting`, esbuild moves every module that a
 * lazily loaded chunk uses and that a barrel statically imported elsewhere
 * re-exports into the chunks that barrel's importers load up front: `--help`
 * loaded all of effect the server uses, and `serve` the 3 MB API reference
 * page. Deep imports keep each chunk to what it uses. Type-only imports are
 * left alone (esbuild drops them).
 */
const deepImports: esbuild.Plugin = {
  name: "deep-imports",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, ({ path }) => {
      if (path.includes(`${Path.sep}node_modules${Path.sep}`)) return undefined
      const source = Fs.readFileSync(path, "utf8")
      const contents = source.replace(barrelImport, (_, names: string, from: string) =>
        names.split(",").map((name) => name.trim()).filter((name) => name !== "" && !name.startsWith("type "))
          .map((name) => {
            const [imported, local = imported] = name.split(/\s+as\s+/) as [string, string?]
            const fn = from === "effect" ? barrelFunctions[imported] : undefined
            return fn !== undefined
              ? `import { ${imported} as ${local} } from "${fn}"`
              : `import * as ${local} from "${from}/${imported}"`
          })
          .join("; "))
      return { contents, loader: "ts" }
    })
  }
}

/**
 * Node's built-in modules are loaded with `require`, not `import`. Importing
 * a built-in from ESM builds a facade that reads every export, and that
 * loads what Node defines lazily: `node:http`'s WebSocket getters load
 * Node's own copy of undici, a third of `serve`'s start-up on a busy machine.
 * `require` (the banner's) returns the module as it is. In the `serve`
 * script (see serveScript), which cannot `import()`, a dynamic import of a
 * built-in becomes a `require` too.
 */
const builtinsByRequire = (dynamicToo: boolean): esbuild.Plugin => ({
  name: "builtins-by-require",
  setup(build) {
    const builtins = new Set(Module.builtinModules)
    build.onResolve({ filter: /^[a-z0-9_:/]+$/ }, ({ path, kind }) => {
      const name = path.replace(/^node:/, "")
      if (!builtins.has(name) || (kind === "dynamic-import" && !dynamicToo)) return undefined
      return kind === "require-call"
        ? { path: `node:${name}`, external: true }
        : { path: name, namespace: "builtin-by-require" }
    })
    build.onLoad({ filter: /.*/, namespace: "builtin-by-require" }, ({ path }) => ({
      contents: `module.exports = require("node:${path}")`,
      loader: "js"
    }))
  }
})

/**
 * CommonJS packages that `serve` imports but seldom uses: undici (outbound
 * requests; @effect/platform-node's HTTP server imports its client too), ws
 * (WebSocket upgrades) and mime (file answers' types). An `import` of them
 * is given a stand-in whose exports are getters: the package is loaded on
 * the first use of one of its exports (the first outbound request, say), not
 * at start-up. Each package is bundled into a file of its own,
 * `dist/vendor/NAME.cjs`, that only the stand-in requires: in a chunk, its
 * code (undici alone is a third of what `serve` loaded) would be read and
 * compiled at every start even though it never runs then. The names are
 * the package's own (with its prototype's methods, for a package that
 * exports an instance, as mime), read here at build time.
 */
const lazyPackages = ["undici", "ws", "mime"]
const vendorDir = Path.join(outdir, "vendor")
/** Resolves and loads packages as the server's own code would. */
const requireHere = Module.createRequire(Path.join(root, "package.json"))

/**
 * A stand-in's `load()`: requires `dist/vendor/NAME.cjs` on its first call.
 * A chunk lives in dist/chunks, an entry point in dist (`__crmRelayUrl`:
 * the banner's, or the serve script's argument): the file is found from either.
 */
const vendorLoader = (name: string): string =>
  "let loaded\n" +
  "const load = () => (loaded ??= require(require(\"node:url\").fileURLToPath(new URL(" +
  `(__crmRelayUrl.includes("/chunks/") ? "../" : "./") + ${JSON.stringify(`vendor/${name}.cjs`)}, __crmRelayUrl))))`

const lazyCommonJs: esbuild.Plugin = {
  name: "lazy-commonjs",
  setup(build) {
    const filter = new RegExp(`^(${lazyPackages.join("|")})$`)
    build.onResolve({ filter }, ({ path, kind }) =>
      kind === "import-statement" ? { path, namespace: "lazy-commonjs" } : undefined)
    build.onLoad({ filter: /.*/, namespace: "lazy-commonjs" }, ({ path }) => {
      const exported = requireHere(path) as object
      const methods = Object.getOwnPropertyNames(Object.getPrototypeOf(exported) ?? {})
        .filter((name) => name !== "constructor" && typeof (exported as Record<string, unknown>)[name] === "function")
      const names = [...new Set([...Object.keys(exported), ...methods])].filter((name) => name !== "default")
      return {
        contents: [
          vendorLoader(path),
          `for (const name of ${JSON.stringify(names)}) {`,
          "  Object.defineProperty(module.exports, name, { enumerable: true, get: () => {",
          "    const value = load()[name]",
          "    return typeof value === \"function\" && !Object.hasOwn(load(), name) ? value.bind(load()) : value",
          "  } })",
          "}"
        ].join("\n"),
        resolveDir: root,
        loader: "js"
      }
    })
  }
}

/** Packages left to Node's resolver: native or WebAssembly parts, or optional drivers we never load. */
const external = ["@electric-sql/pglite", "pg-native"]

/** What every bundle here shares: Node, source maps, minified whitespace and syntax (NOMIN=1: not), in memory until placed. */
const bundled = {
  absWorkingDir: root,
  bundle: true,
  platform: "node",
  target: "node22",
  external,
  sourcemap: "linked",
  sourcesContent: true,
  minifyWhitespace: !process.env.NOMIN,
  minifySyntax: !process.env.NOMIN,
  legalComments: "linked",
  metafile: true,
  write: false,
  logLevel: "warning"
} satisfies esbuild.BuildOptions

const result = await esbuild.build({
  ...bundled,
  entryPoints: { main: "src/main.ts" },
  outdir,
  splitting: true,
  format: "esm",
  plugins: [deepImports, builtinsByRequire(false), lazyCommonJs],
  // Bundled CommonJS (pg, ...) calls `require` for Node's built-in modules; ESM has none of its own.
  banner: {
    js: "import { createRequire as __crmRelayRequire } from \"node:module\"; const __crmRelayUrl = import.meta.url; const require = __crmRelayRequire(__crmRelayUrl);"
  },
  chunkNames: "chunks/[name]-[hash]"
})

/**
 * PGlite, which `serve` imports only when the embedded database opens, and
 * which the `serve` script cannot `import()`: Node's `require` loads an ES
 * module as well (it has no top-level await).
 */
const pgliteByRequire: esbuild.Plugin = {
  name: "pglite-by-require",
  setup(build) {
    build.onResolve({ filter: /^@electric-sql\/pglite$/ }, ({ path, kind }) =>
      kind === "dynamic-import" ? { path, namespace: "pglite-by-require" } : undefined)
    build.onLoad({ filter: /.*/, namespace: "pglite-by-require" }, ({ path }) => ({
      contents: `module.exports = require(${JSON.stringify(path)})`,
      loader: "js"
    }))
  }
}

/**
 * The API reference page's script (3.3 MB, a string in @effect/platform's
 * `internal/httpApiScalar.js`): in the `serve` script, which has no chunks to
 * leave it in, it is a file of its own (`dist/vendor/scalar.cjs`), read when
 * the page is first asked for, as undici's (lazyCommonJs).
 */
const scalarPage = Path.join(Path.dirname(requireHere.resolve("@effect/platform/package.json")), "dist", "cjs", "internal", "httpApiScalar.js")
const lazyScalarPage: esbuild.Plugin = {
  name: "lazy-scalar-page",
  setup(build) {
    build.onResolve({ filter: /\/internal\/httpApiScalar\.js$/ }, ({ importer }) =>
      importer.includes(`${Path.sep}@effect${Path.sep}platform${Path.sep}`) ? { path: "scalar", namespace: "lazy-scalar-page" } : undefined)
    build.onLoad({ filter: /.*/, namespace: "lazy-scalar-page" }, () => ({
      contents: `${vendorLoader("scalar")}\nObject.defineProperty(module.exports, "javascript", { enumerable: true, get: () => load().javascript })`,
      loader: "js"
    }))
  }
}

/**
 * `crm-relay serve`'s own build: the server (src/serve.ts) in one script,
 * `dist/serve.js`, that bin/crm-relay.js compiles with V8's code cache of a
 * previous run (see there, and src/config/CodeCache.ts). A script, not a
 * module: V8 caches the code a module compiles as it runs only for scripts.
 * esbuild writes it as ESM (its strict semantics), and this build makes sure
 * nothing in it needs a module: no `import`, `export` or `import.meta`
 * (`require` and `__crmRelayUrl` are the arguments the binary passes to the
 * function the script is). No
 * splitting, so what `serve` loads lazily (the API reference page, PGlite,
 * undici) stays out of the script or in a file of its own.
 */
const serveScript = await esbuild.build({
  ...bundled,
  // cli.js: every command (src/main.ts) as one script of the same shape, for the single executable
  // (release.ts), which has no file system to load chunks from. bin/crm-relay.js never runs it.
  entryPoints: { serve: "src/serve.ts", cli: "src/main.ts" },
  outdir,
  format: "esm",
  plugins: [deepImports, builtinsByRequire(true), pgliteByRequire, lazyScalarPage, lazyCommonJs],
  define: { "import.meta.url": "__crmRelayUrl" },
  // The script is one function expression, which the binary calls (run on its own, it does nothing):
  // in the file, so that its source map says where each line is.
  banner: { js: "(function (require, __crmRelayUrl) {\"use strict\";" },
  footer: { js: "})" }
})
for (const [file, output] of Object.entries(serveScript.metafile.outputs)) {
  const modular = output.imports.filter((imported) => imported.kind !== "require-call")
  if (file.endsWith(".js") && (modular.length > 0 || output.exports.length > 0)) {
    throw new Error(`${file} must be a script, but imports ${JSON.stringify(modular)} and exports ${JSON.stringify(output.exports)}`)
  }
}
for (const output of serveScript.outputFiles) {
  if (output.path.endsWith(".js") && output.text.includes("import.meta")) throw new Error(`${output.path} must be a script, but uses import.meta`)
}

const placed = new Set<string>()
/** Writes `file` whole or not at all: a reader never sees it half written. */
const place = (file: string, contents: Uint8Array | string): void => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  const staged = `${file}.${process.pid}.tmp`
  Fs.writeFileSync(staged, contents)
  Fs.renameSync(staged, file)
  placed.add(file)
}
const entry = Path.join(outdir, "main.js")
// Chunks before the entry point that imports them.
const outputs = [...result.outputFiles].sort((a, b) => Number(a.path === entry) - Number(b.path === entry))
for (const output of [...serveScript.outputFiles, ...outputs]) place(output.path, output.contents)
Object.assign(result.metafile.inputs, serveScript.metafile.inputs)
Object.assign(result.metafile.outputs, serveScript.metafile.outputs)
// The lazily loaded packages, one CommonJS file each (see lazyCommonJs), and the API reference page's script (lazyScalarPage).
const vendoredFiles: ReadonlyArray<readonly [string, string]> = [...lazyPackages.map((name) => [name, requireHere.resolve(name)] as const), ["scalar", scalarPage]]
for (const [name, file] of vendoredFiles) {
  const vendored = await esbuild.build({
    ...bundled,
    entryPoints: [file],
    outfile: Path.join(vendorDir, `${name}.cjs`),
    format: "cjs"
  })
  for (const output of vendored.outputFiles) place(output.path, output.contents)
  Object.assign(result.metafile.inputs, vendored.metafile.inputs)
  Object.assign(result.metafile.outputs, vendored.metafile.outputs)
}
place(Path.join(outdir, "meta.json"), JSON.stringify(result.metafile))

// The Integrations area's page (built by Nx before this) travels with the binary: `crm-relay serve` finds it in dist/portal.
const portalBuild = Path.join(root, "..", "portal", "dist")
const copyTree = (from: string, to: string): void => {
  for (const item of Fs.readdirSync(from, { withFileTypes: true })) {
    const source = Path.join(from, item.name)
    if (item.isDirectory()) copyTree(source, Path.join(to, item.name))
    else place(Path.join(to, item.name), Fs.readFileSync(source))
  }
}
if (Fs.existsSync(Path.join(portalBuild, "index.html"))) copyTree(portalBuild, Path.join(outdir, "portal"))
else process.stderr.write("crm-relay: the Integrations area's page is not built (apps/portal/dist); build through Nx: npx nx run @crm-relay/server:build\n")

/** Removes what an earlier build left that this one did not write (never another build's staged files). */
const sweep = (dir: string): void => {
  for (const item of Fs.readdirSync(dir, { withFileTypes: true })) {
    const file = Path.join(dir, item.name)
    if (item.isDirectory()) sweep(file)
    else if (!placed.has(file) && !file.endsWith(".tmp")) Fs.rmSync(file, { force: true })
  }
}
sweep(outdir)
const scripts = Object.entries(result.metafile.outputs).filter(([file]) => /\.c?js$/.test(file))
const bytes = scripts.reduce((sum, [, output]) => sum + output.bytes, 0)
process.stdout.write(`crm-relay: ${scripts.length} file(s), ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${Path.relative(process.cwd(), outdir) || "."}\n`)
