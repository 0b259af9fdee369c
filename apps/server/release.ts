/**
 * The release: `crm-relay`, one executable for linux-x64 (Node's
 * single-executable applications, from the Node the project pins), its
 * tarball with a short README, a CycloneDX SBOM of what it carries, and
 * SHA256SUMS, all in `release/` at the repository's root.
 *
 *   npm run release                          (Nx: builds first; cached like the build)
 *   npx tsx release.ts                       (from apps/server, on an existing build)
 *
 * The executable's main script is executable/Launcher.ts; the server's
 * scripts (dist/serve.js, dist/cli.js), the lazily loaded packages
 * (dist/vendor), the Integrations area's page (dist/portal) and PGlite (its
 * CommonJS build, WebAssembly and data) are its assets.
 */
import * as esbuild from "esbuild"
import { execFileSync, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Path from "node:path"
import { sbom } from "./scripts/Sbom.js"

const root = import.meta.dirname
const workspace = Path.resolve(root, "..", "..")
const dist = Path.join(root, "dist")
const out = Path.join(workspace, "release")
const work = Path.join(out, ".work")
const requireHere = Module.createRequire(Path.join(root, "package.json"))
// The release's version is the root package.json's, as the server's own (src/config/Version.ts).
const version = (JSON.parse(Fs.readFileSync(Path.join(workspace, "package.json"), "utf8")) as { version: string }).version
const git = (...args: ReadonlyArray<string>): string => execFileSync("git", args, { cwd: workspace, encoding: "utf8" }).trim()
const started = Date.now()

Fs.rmSync(out, { recursive: true, force: true })
Fs.mkdirSync(work, { recursive: true })

/**
 * The launcher, one CommonJS script (what Node's single-executable support runs). `cliCodeCacheOut` makes the
 * launcher of the first, unshipped executable: it writes the compiled code of cli.js there when its command is done.
 */
const bundleLauncher = async (outfile: string, cliCodeCacheOut?: string): Promise<string> => {
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: ["src/executable/Launcher.ts"],
    outfile,
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    minifySyntax: true,
    define: { CLI_CODE_CACHE_OUT: cliCodeCacheOut === undefined ? "undefined" : JSON.stringify(cliCodeCacheOut) },
    logLevel: "warning"
  })
  return outfile
}

// PGlite's CommonJS build, whose `import()`s of Node's modules (a script compiled by the launcher has no module
// loader) call the launcher's `__crmRelayImport` instead.
const pgliteDir = Path.dirname(requireHere.resolve("@electric-sql/pglite"))
const pgliteSource = Fs.readFileSync(Path.join(pgliteDir, "index.cjs"), "utf8")
  .replace(/\bimport\("([a-z/:]+)"\)/g, (call, name: string) => (Module.isBuiltin(name) ? `__crmRelayImport("${name}")` : call))
if (/\bimport\(/.test(pgliteSource)) throw new Error("PGlite imports more than Node's modules: the executable cannot carry it as it is")
Fs.writeFileSync(Path.join(work, "pglite.cjs"), pgliteSource)

const serveScript = Fs.readFileSync(Path.join(dist, "serve.js"))
const dirty = git("status", "--porcelain").length > 0
const build = { version, commit: git("rev-parse", "--short=12", "HEAD"), dirty, id: createHash("sha256").update(serveScript).digest("hex").slice(0, 16) }
Fs.writeFileSync(Path.join(work, "build.json"), JSON.stringify(build))

const assets: Record<string, string> = {
  "build.json": Path.join(work, "build.json"),
  "serve.js": Path.join(dist, "serve.js"),
  "cli.js": Path.join(dist, "cli.js"),
  "pglite/index.cjs": Path.join(work, "pglite.cjs"),
  "pglite/pglite.wasm": Path.join(pgliteDir, "pglite.wasm"),
  "pglite/initdb.wasm": Path.join(pgliteDir, "initdb.wasm"),
  "pglite/pglite.data": Path.join(pgliteDir, "pglite.data")
}
const addTree = (dir: string, prefix: string, keep: (name: string) => boolean): void => {
  for (const item of Fs.readdirSync(dir, { withFileTypes: true })) {
    const file = Path.join(dir, item.name)
    if (item.isDirectory()) addTree(file, `${prefix}${item.name}/`, keep)
    else if (keep(item.name)) assets[`${prefix}${item.name}`] = file
  }
}
addTree(Path.join(dist, "vendor"), "vendor/", (name) => name.endsWith(".cjs"))
addTree(Path.join(dist, "portal"), "portal/", (name) => !name.endsWith(".map"))

/** A single executable at `executable` running `main` with `assets`: this Node (the pinned one: npm puts node_modules/.bin first on PATH) makes the blob and is its body. */
const postject = Path.join(Path.dirname(requireHere.resolve("postject/package.json")), "dist", "cli.js")
const seaExecutable = (main: string, executable: string): void => {
  const blob = Path.join(work, "sea-prep.blob")
  const seaConfig = Path.join(work, "sea-config.json")
  Fs.writeFileSync(seaConfig, JSON.stringify({ main, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, assets }, null, 2))
  execFileSync(process.execPath, ["--experimental-sea-config", seaConfig], { cwd: work, stdio: "inherit" })
  Fs.copyFileSync(process.execPath, executable)
  Fs.chmodSync(executable, 0o755)
  execFileSync(process.execPath, [postject, executable, "NODE_SEA_BLOB", blob, "--sentinel-fuse", "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2"], { stdio: "ignore" })
  Fs.rmSync(blob)
}
/** `executable --help` with none of this shell's Node settings (NODE_OPTIONS's V8 flags would make a cache V8 refuses under the defaults); its stderr. */
const help = (executable: string, env: Record<string, string> = {}): string => {
  const ran = spawnSync(executable, ["--help"], { cwd: work, env: { PATH: process.env["PATH"] ?? "", ...env }, encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] })
  if (ran.status !== 0) throw new Error(`${Path.basename(executable)} --help failed (${ran.status ?? ran.signal}):\n${ran.stderr}`)
  return ran.stderr
}

// The compiled code of every command's script (cli.js), carried: without it each command compiles the script whole
// before it runs (`crm-relay --help` took 1.6× the built binary's time, whose modules Node's compile cache keeps).
// V8 accepts a cache only from its own version under the same flags, so the executable makes it: a first one runs
// `--help` and writes the code of cli.js, what it compiled while it ran included; the second carries it.
const cliCodeCache = Path.join(work, "cli.js.v8")
seaExecutable(await bundleLauncher(Path.join(work, "producer.cjs"), cliCodeCache), Path.join(work, "producer"))
help(Path.join(work, "producer"))
Fs.rmSync(Path.join(work, "producer"))
assets["cli.js.v8"] = cliCodeCache
const executable = Path.join(work, "crm-relay")
seaExecutable(await bundleLauncher(Path.join(work, "launcher.cjs")), executable)
// The executable's own check that V8 takes what it carries (a release whose commands compile from scratch is a slow one).
const told = help(executable, { NODE_DEBUG: "crm-relay" })
if (!told.includes("code cache cli.js.v8: accepted")) throw new Error(`the executable refuses its code cache of cli.js:\n${told}`)

// The tarball: one folder with the executable and a short README, with no owner, time or order of the machine in it.
// (The executable itself is not byte-stable across builds: the code cache V8 writes after `--help` differs run to run.)
const name = `crm-relay-${version}-linux-x64`
const folder = Path.join(work, name)
Fs.mkdirSync(folder)
Fs.renameSync(executable, Path.join(folder, "crm-relay"))
Fs.copyFileSync(Path.join(root, "release", "README.md"), Path.join(folder, "README.md"))
const tarball = `${name}.tar.gz`
execFileSync("tar", ["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner", "-cf", Path.join(work, `${name}.tar`), name], { cwd: work })
execFileSync("gzip", ["-n", "-9", Path.join(work, `${name}.tar`)])
Fs.renameSync(Path.join(work, `${name}.tar.gz`), Path.join(out, tarball))
// The executable stays beside the release files too, for the tests and the image (Containerfile).
Fs.renameSync(Path.join(folder, "crm-relay"), Path.join(out, "crm-relay"))

const meta = JSON.parse(Fs.readFileSync(Path.join(dist, "meta.json"), "utf8")) as { outputs: Record<string, { inputs: Record<string, unknown> }> }
const carried = Object.values(assets).map((file) => Path.relative(root, file))
const inputs = Object.entries(meta.outputs)
  .filter(([file]) => carried.includes(file))
  .flatMap(([, output]) => Object.keys(output.inputs))
const sbomFile = `${name}.cdx.json`
Fs.writeFileSync(Path.join(out, sbomFile), `${JSON.stringify(sbom({ root, version, commit: build.commit, inputs: [...inputs, Path.relative(root, Path.join(pgliteDir, "index.cjs"))] }), null, 2)}\n`)

const sums = [tarball, sbomFile, "crm-relay"].map((file) => `${createHash("sha256").update(Fs.readFileSync(Path.join(out, file))).digest("hex")}  ${file}`)
Fs.writeFileSync(Path.join(out, "SHA256SUMS"), `${sums.join("\n")}\n`)
Fs.rmSync(work, { recursive: true, force: true })

const size = (file: string) => `${(Fs.statSync(Path.join(out, file)).size / 1024 / 1024).toFixed(1)} MiB`
process.stdout.write(
  `crm-relay ${version} (commit ${build.commit}${dirty ? ", dirty tree" : ""}): release/crm-relay ${size("crm-relay")}, ${tarball} ${size(tarball)}, ` +
    `${sbomFile}, SHA256SUMS in ${((Date.now() - started) / 1000).toFixed(1)} s\n`
)
