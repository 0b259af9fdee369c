#!/usr/bin/env node
// The crm-relay binary: runs the production build in dist/ (`npx nx run @crm-relay/server:build`;
// `npm start` builds it first). Development runs the sources instead: `npm run dev -- <command>`.
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as Module from "node:module"
import { createHash } from "node:crypto"
import { fileURLToPath } from "node:url"
import { debuglog } from "node:util"
import * as Vm from "node:vm"

const entry = new URL("../dist/main.js", import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write("crm-relay is not built: run `npx nx run @crm-relay/server:build` (npm start and npm test build it).\n")
  process.exit(1)
}
// V8's compiled code is kept between runs (NODE_COMPILE_CACHE says where; the OS temporary directory by default;
// NODE_DISABLE_COMPILE_CACHE=1 turns it off).
const cache = Module.enableCompileCache?.()
const debug = debuglog("crm-relay")

/**
 * The cache at `path` when it is the server's user's own and nobody else may write it (it is
 * code the server runs: a file another local user could have put in a shared temporary
 * directory is ignored, and replaced); undefined when there is none. Checked on the file
 * opened, not on the name, which could change in between.
 */
const ownCache = (path) => {
  let fd
  try {
    fd = openSync(path, "r")
  } catch {
    return undefined
  }
  try {
    const { uid, mode } = fstatSync(fd)
    if ((process.getuid !== undefined && uid !== process.getuid()) || (mode & 0o022) !== 0) {
      debug("code cache %s: ignored (not the server's user's own, or others may write it)", path)
      return undefined
    }
    return readFileSync(fd)
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

/**
 * `crm-relay serve` alone runs dist/serve.js, the server bundled into one script, and keeps
 * its compiled code, all of it, in Node's compile cache directory: Node's own cache of a
 * module holds only what V8 compiled before the module ran, and the server compiles most of
 * its code while it starts (src/config/CodeCache.ts). V8 checks a cache against its version,
 * its flags and the script's length and refuses one that does not match; the file's name
 * adds the script's path, Node's version and the script's size, inode and modification time,
 * so a new build never meets an old build's code. A missing, refused or unreadable cache
 * costs only the time to compile. NODE_DEBUG=crm-relay tells on stderr what became of it.
 */
const runServe = (script) => {
  const file = fileURLToPath(script)
  const stat = statSync(file)
  const directory = cache?.directory
  // Named by checkout (the path's hash) and Node, then by build: a new build's save removes the one before.
  const prefix = `crm-relay-serve-${createHash("sha256").update(file).digest("hex").slice(0, 12)}-${process.version}-${process.arch}-`
  const cached = directory === undefined ? undefined : `${directory}/${prefix}${stat.size}-${stat.ino}-${Math.round(stat.mtimeMs)}.v8`
  const cachedData = cached === undefined ? undefined : ownCache(cached)
  // The script is a function of `require` and `__crmRelayUrl` (what `import.meta.url` is in the bundle): a script has neither.
  const compiled = new Vm.Script(readFileSync(file, "utf8"), { filename: file, cachedData })
  const accepted = cachedData !== undefined && !compiled.cachedDataRejected
  debug("code cache %s: %s", cached ?? "(Node's compile cache is off)", accepted ? "accepted" : cachedData === undefined ? "none" : "refused")
  if (cached !== undefined && !accepted) {
    // Called by the server a second after start (src/config/CodeCache.ts); on a failure, the next start compiles again.
    globalThis[Symbol.for("crm-relay.saveCodeCache")] = () => {
      try {
        const staged = `${cached}.${process.pid}.tmp`
        writeFileSync(staged, compiled.createCachedData(), { mode: 0o600 })
        renameSync(staged, cached)
        // This checkout's caches of earlier builds (on this Node), and what a crashed save left.
        for (const old of readdirSync(directory)) {
          if (old.startsWith(prefix) && `${directory}/${old}` !== cached) rmSync(`${directory}/${old}`, { force: true })
        }
        if (cachedData !== undefined) debug("code cache %s: replaced", cached)
        else debug("code cache %s: saved", cached)
      } catch (error) {
        debug("code cache %s: not saved (%s)", cached, error)
      }
    }
  }
  compiled.runInThisContext()(Module.createRequire(file), script.href)
}

const serve = new URL("../dist/serve.js", import.meta.url)
// Node maps stack traces (--enable-source-maps) only of the modules it loads itself: then main.js runs `serve`, from its chunks.
if (process.argv.length === 3 && process.argv[2] === "serve" && existsSync(serve) && !process.sourceMapsEnabled) runServe(serve)
else await import(entry.href)
