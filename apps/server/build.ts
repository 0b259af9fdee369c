/**
 * The production artifact of the `crm-relay` binary: `src/main.ts` and every
 * workspace library it imports, bundled by esbuild into `dist/` as ESM with
 * source maps. Each command's code sits behind a dynamic `import()`, so with
 * `splitting` a command loads only its own chunks (`--help` loads no
 * database driver and no HTTP server). PGlite stays external: it finds its
 * WebAssembly and data files next to its own module, and it is imported only
 * when the embedded database opens.
 *
 *   npx nx run @crm-relay/server:build      (cached by Nx; what `npm start` and the tests use)
 *   node build.ts                           (the same, uncached, from apps/server)
 */
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = import.meta.dirname
const outdir = Path.join(root, "dist")

/** Packages left to Node's resolver: native or WebAssembly parts, or optional drivers we never load. */
const external = ["@electric-sql/pglite", "pg-native"]

Fs.rmSync(outdir, { recursive: true, force: true })

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { main: "src/main.ts" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  external,
  // Bundled CommonJS (pg, ...) calls `require` for Node's built-in modules; ESM has none of its own.
  banner: { js: "import { createRequire as __crmRelayRequire } from \"node:module\"; const require = __crmRelayRequire(import.meta.url);" },
  sourcemap: "linked",
  sourcesContent: true,
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "linked",
  chunkNames: "chunks/[name]-[hash]",
  metafile: true,
  logLevel: "warning"
})

Fs.writeFileSync(Path.join(outdir, "meta.json"), JSON.stringify(result.metafile))
const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith(".js"))
const bytes = outputs.reduce((sum, [, output]) => sum + output.bytes, 0)
process.stdout.write(`crm-relay: ${outputs.length} file(s), ${(bytes / 1024 / 1024).toFixed(1)} MiB in ${Path.relative(process.cwd(), outdir) || "."}\n`)
