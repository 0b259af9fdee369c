/**
 * Runs shell text as an operator would: bash in a clone-like directory (the
 * repository's files linked or copied in, its own `.data`), in a process group of its
 * own so that everything it leaves running in the background is stopped
 * when the scope closes.
 */
import { Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** The repository root. */
export const ROOT = Path.resolve(import.meta.dirname, "..", "..", "..")

// Local state a fresh clone does not have.
const LEFT_OUT = new Set([".data", ".nx", ".git", "coverage", "dist"])

// Folders holding workspace projects: Nx finds projects only in real folders, not through links.
const PROJECT_FOLDERS = new Set(["apps", "libs"])
const WORKSPACE_PROJECTS = new Set(["tools"])

/**
 * `target` as a real folder holding copies of the entries of `source` (but
 * local state), its installed `node_modules` linked. Copies, not links: a
 * build that resolves real paths (Vite does) must find its sources inside
 * the project it builds, as in a clone.
 */
const copyEntries = (source: string, target: string): void => {
  Fs.mkdirSync(target)
  for (const entry of Fs.readdirSync(source)) {
    if (LEFT_OUT.has(entry)) continue
    if (entry === "node_modules") Fs.symlinkSync(Path.join(source, entry), Path.join(target, entry))
    // A nested install is not copied (a clone has none): tools/n8n's n8n is 3 GB, and copying it blocked this
    // process long enough for the test runner's worker to time out.
    else Fs.cpSync(Path.join(source, entry), Path.join(target, entry), { recursive: true, verbatimSymlinks: true, filter: notInstalled })
  }
}

/** False for an installed folder (`node_modules`) below the top of a project. */
const notInstalled = (from: string): boolean => Path.basename(from) !== "node_modules"

// Installed entries that point back into the workspace (the workspace packages and the bins,
// all relative links): copied as links, so that they resolve to this folder's projects.
const WORKSPACE_LINKS = new Set([".bin", "@crm-relay"])

/**
 * `target` as a real `node_modules` folder: third-party packages linked to the
 * installed ones, but the workspace's own packages and bins resolving inside
 * the clone-like folder, as after `npm install` in a clone (the `crm-relay`
 * bin runs this folder's build, not the repository's).
 */
const linkInstalled = (source: string, target: string): void => {
  Fs.mkdirSync(target)
  for (const entry of Fs.readdirSync(source)) {
    if (WORKSPACE_LINKS.has(entry)) Fs.cpSync(Path.join(source, entry), Path.join(target, entry), { recursive: true, verbatimSymlinks: true })
    else Fs.symlinkSync(Path.join(source, entry), Path.join(target, entry))
  }
}

/**
 * A temporary directory that looks like a fresh clone: every top-level entry
 * of the repository linked in, but the projects' folders real (their entries
 * copied), so that Nx finds the projects as in a clone.
 */
export const cloneLike = (prefix: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
      for (const entry of Fs.readdirSync(ROOT)) {
        if (LEFT_OUT.has(entry)) continue
        const source = Path.join(ROOT, entry)
        if (entry === "node_modules") {
          linkInstalled(source, Path.join(dir, entry))
        } else if (PROJECT_FOLDERS.has(entry)) {
          Fs.mkdirSync(Path.join(dir, entry))
          for (const project of Fs.readdirSync(source)) copyEntries(Path.join(source, project), Path.join(dir, entry, project))
        } else if (WORKSPACE_PROJECTS.has(entry)) {
          copyEntries(source, Path.join(dir, entry))
        } else {
          Fs.symlinkSync(source, Path.join(dir, entry))
        }
      }
      return dir
    }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/**
 * The environment of a fresh shell: no database URL, no npm, Nx or test variables of this
 * process (an Nx task's variables would reach the walkthrough's own `nx`, and vitest's NODE_ENV=test
 * would make its Vite build a development bundle).
 */
export const shellEnv = (extra: Record<string, string> = {}): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(npm_|INIT_CWD$|DATABASE_URL$|VITEST|NODE_OPTIONS$|NODE_EXTRA_CA_CERTS$|EGRESS_|NX_|FORCE_COLOR$|NODE_ENV$)/.test(name)) continue
    env[name] = value
  }
  // npm scripts and npx use the project's Node (the `node` devDependency), as README promises.
  env["PATH"] = `${Path.join(ROOT, "node_modules", ".bin")}${Path.delimiter}${env["PATH"] ?? ""}`
  return { ...env, NO_COLOR: "1", ...extra }
}

/** What a script printed and how it ended. */
export interface ScriptRun {
  readonly code: number | null
  readonly output: string
}

// Stops the group: SIGTERM, then SIGKILL for whatever is left after `grace`.
/** Whether any process of the group `pid` leads is still running. */
export const groupAlive = (pid: number): boolean => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

const stopGroup = (pid: number, graceMs: number) =>
  Effect.promise(async () => {
    const alive = () => groupAlive(pid)
    if (!alive()) return
    process.kill(-pid, "SIGTERM")
    const until = Date.now() + graceMs
    while (alive() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 200))
    if (alive()) process.kill(-pid, "SIGKILL")
  })

/**
 * Runs `script` with `bash -e -o pipefail` in `cwd`; resolves when bash exits
 * (background jobs keep running, and keep writing to `output`, until the scope closes),
 * or with code `null` when it is still running after `deadlineMs`: a hung script then
 * fails its test with what it printed, not with a bare test timeout.
 */
export const runScript = (script: string, cwd: string, env: Record<string, string>, deadlineMs = 600_000) =>
  Effect.gen(function*() {
    const output = { text: "" }
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = ChildProcess.spawn("bash", ["-e", "-o", "pipefail", "-c", script], {
          cwd,
          env,
          detached: true,
          stdio: ["ignore", "pipe", "pipe"]
        })
        child.stdout.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
        child.stderr.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
        return child
      }),
      (child) => stopGroup(child.pid!, 30_000)
    )
    const exited = Effect.async<number | null>((resume) => {
      if (child.exitCode !== null) return resume(Effect.succeed(child.exitCode))
      child.once("exit", (code) => resume(Effect.succeed(code)))
    })
    const code = yield* exited.pipe(
      Effect.timeoutTo({
        duration: deadlineMs,
        onSuccess: (code) => code,
        onTimeout: () => {
          output.text += `\n--- still running after ${deadlineMs / 1000} s: stopped\n`
          return null
        }
      })
    )
    return { code, output: () => output.text, pid: child.pid! }
  })

/** The fenced `sh` blocks of the README section that starts with `heading` (up to the next heading of its level or above). */
export const shBlocks = (readme: string, heading: string): ReadonlyArray<string> => {
  const start = readme.indexOf(`\n${heading}\n`)
  if (start === -1) return []
  const level = heading.split(" ")[0]!.length
  const rest = readme.slice(start + heading.length + 2)
  const next = rest.search(new RegExp(`^#{1,${level}} `, "m"))
  const section = next === -1 ? rest : rest.slice(0, next)
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!)
}
