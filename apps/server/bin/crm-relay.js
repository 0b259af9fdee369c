#!/usr/bin/env node
// The crm-relay binary: runs the production build in dist/ (`npx nx run @crm-relay/server:build`;
// `npm start` builds it first). Development runs the sources instead: `npm run dev -- <command>`.
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as Module from "node:module"
import { createHash } from "node:crypto"
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
 * `crm-relay serve` alone runs dist/serve.js, the server bundled into one script, and keeps
 * its compiled code, all of it, in Node's compile cache directory: Node's own cache of a
 * module holds only what V8 compiled before the module ran, and the server compiles most of
 * its code while it starts (src/config/CodeCache.ts). V8 checks a cache against its version,
 * its flags and the script's length and refuses one that does not match; the file's name
 * adds the script's path, size, inode and modification time, so a new build never meets an
 * old build's code. A missing, refused or unreadable cache costs only the time to compile.
 */
const runServe = (script) => {
  const file = script.pathname
  const stat = statSync(file)
  const directory = cache?.directory
  // In a directory of its own per Node version (Node's); one name per checkout (the path's hash), then per build.
  const prefix = `crm-relay-serve-${createHash("sha256").update(file).digest("hex").slice(0, 12)}-`
  const key = `${stat.size}-${stat.ino}-${Math.round(stat.mtimeMs)}`
  const cached = directory === undefined ? undefined : `${directory}/${prefix}${key}.v8`
  let cachedData
  try {
    if (cached !== undefined) cachedData = readFileSync(cached)
  } catch {
    // None yet.
  }
  // `require`, `__crmRelayUrl` (what `import.meta.url` is in the bundle) as arguments: a script has neither.
  const compiled = new Vm.Script(`(function (require, __crmRelayUrl) {"use strict";${readFileSync(file, "utf8")}\n})`, { filename: file, cachedData })
  const accepted = cachedData !== undefined && !compiled.cachedDataRejected
  debug("code cache %s: %s", cached ?? "(Node's compile cache is off)", accepted ? "accepted" : cachedData === undefined ? "none" : "refused")
  if (cached !== undefined && !accepted) {
    // Called by the server a second after start (src/config/CodeCache.ts); on a failure, the next start compiles again.
    globalThis[Symbol.for("crm-relay.saveCodeCache")] = () => {
      try {
        const staged = `${cached}.${process.pid}.tmp`
        writeFileSync(staged, compiled.createCachedData(), { mode: 0o600 })
        renameSync(staged, cached)
        // This checkout's caches of earlier builds or Nodes, and what a crashed save left.
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
if (process.argv.length === 3 && process.argv[2] === "serve" && existsSync(serve)) runServe(serve)
else await import(entry.href)
