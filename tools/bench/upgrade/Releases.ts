/**
 * The two release executables an upgrade check runs: this tree's
 * (`npm run release`, cached by Nx) and an earlier commit's, built in a
 * temporary `git worktree` of that commit with its own `npm ci` and kept in
 * `<system temp>/crm-relay-upgrade-check/<commit>/crm-relay`, so a rerun
 * against the same commit builds nothing.
 */
import { Data, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url))
const MIGRATIONS = "libs/store/src/migrations"

/** A build or a git command failed; `message` says which and where its output is. */
export class BuildFailed extends Data.TaggedError("BuildFailed")<{ readonly message: string }> {}

const git = (...args: ReadonlyArray<string>): string =>
  ChildProcess.execFileSync("git", args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()

/** The full hash of `rev`, or a sentence saying it names no commit. */
export const resolveCommit = (rev: string) =>
  Effect.try({
    try: () => git("rev-parse", "--verify", "--quiet", `${rev}^{commit}`),
    catch: () => new BuildFailed({ message: `${rev} names no commit of this repository: give --from a commit hash, a tag or a branch.` })
  })

/** The version a commit's root package.json names. */
export const versionAt = (commit: string): string => {
  try {
    return (JSON.parse(git("show", `${commit}:package.json`)) as { version?: string }).version ?? "?"
  } catch {
    return "?"
  }
}

/**
 * The default `--from`: the last commit of the first-parent history (main's merges) before the newest
 * migration file arrived, i.e. the newest commit whose list of migrations differs from this tree's. A
 * migration edited before its release (on a branch, or between two merges of one issue) is no release
 * boundary: only files added or removed count.
 */
export const defaultFrom = () =>
  Effect.try({
    try: () => {
      const changed = git("log", "--first-parent", "--diff-filter=AD", "--format=%H", "-1", "--", `${MIGRATIONS}/[0-9]*`)
      if (changed === "") throw new Error("no migration was ever added")
      return git("rev-parse", `${changed}^1`)
    },
    catch: (error) => new BuildFailed({ message: `No earlier release to start from (${String(error)}): give --from <commit>.` })
  })

/** Runs `command` in `cwd` with its output appended to `log`; fails naming the log. */
const run = (command: string, args: ReadonlyArray<string>, cwd: string, log: string, env: Record<string, string> = {}) =>
  Effect.async<void, BuildFailed>((resume) => {
    const fd = Fs.openSync(log, "a")
    Fs.writeSync(fd, `\n$ ${command} ${args.join(" ")}   (in ${cwd})\n`)
    const child = ChildProcess.spawn(command, args, { cwd, stdio: ["ignore", fd, fd], env: { ...process.env, ...env } })
    child.on("exit", (code, signal) => {
      Fs.closeSync(fd)
      resume(
        code === 0
          ? Effect.void
          : Effect.fail(new BuildFailed({ message: `${command} ${args.join(" ")} failed (${signal ?? `code ${code}`}) in ${cwd}: see ${log}.` }))
      )
    })
    return Effect.sync(() => child.kill("SIGTERM"))
  })

/** Nx without its daemon or cloud: a build of a temporary checkout leaves no process behind. */
const NX_ENV = { NX_DAEMON: "false", NX_NO_CLOUD: "true", NX_TUI: "false" }

/** Where built executables are kept, by commit. */
export const cacheDir = Path.join(Os.tmpdir(), "crm-relay-upgrade-check")

/**
 * The release executable of `commit`: from the cache, or built in a temporary worktree (its own
 * `npm ci`, then `npx nx run @crm-relay/server:release`), which is removed afterwards.
 */
export const releaseOf = (commit: string, say: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const kept = Path.join(cacheDir, commit, "crm-relay")
    if (Fs.existsSync(kept)) {
      yield* say(`old release: ${kept} (cached)`)
      return kept
    }
    Fs.mkdirSync(cacheDir, { recursive: true })
    const log = Path.join(cacheDir, `${commit}.build.log`)
    Fs.rmSync(log, { force: true })
    const started = performance.now()
    yield* say(`old release: building ${commit.slice(0, 12)} in a temporary worktree (npm ci, then the release; 1-4 minutes; output in ${log})`)
    yield* Effect.acquireUseRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(cacheDir, `${commit}.build-`))),
      (work) =>
        Effect.gen(function*() {
          yield* run("git", ["worktree", "add", "--detach", work, commit], ROOT, log)
          yield* run("npm", ["ci", "--no-audit", "--no-fund"], work, log)
          yield* run("npx", ["nx", "run", "@crm-relay/server:release", "--outputStyle=stream"], work, log, NX_ENV)
          Fs.mkdirSync(Path.dirname(kept), { recursive: true })
          // Copied beside, then renamed: a run stopped halfway leaves no half executable in the cache.
          Fs.copyFileSync(Path.join(work, "release", "crm-relay"), `${kept}.tmp`)
          Fs.chmodSync(`${kept}.tmp`, 0o755)
          Fs.renameSync(`${kept}.tmp`, kept)
        }),
      (work) =>
        Effect.sync(() => {
          try {
            git("worktree", "remove", "--force", work)
          } catch {
            // Not registered (the add failed): the folder alone goes.
          }
          Fs.rmSync(work, { recursive: true, force: true })
          try {
            git("worktree", "prune")
          } catch {
            // Nothing to prune.
          }
        })
    )
    yield* say(`old release: built in ${((performance.now() - started) / 1000).toFixed(0)} s, kept at ${kept}`)
    return kept
  })

/** This tree's release executable, `npm run release` (Nx rebuilds it only when the tree changed). */
export const releaseOfThisTree = (say: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    Fs.mkdirSync(cacheDir, { recursive: true })
    const log = Path.join(cacheDir, "this-tree.build.log")
    Fs.rmSync(log, { force: true })
    const started = performance.now()
    yield* run("npx", ["nx", "run", "@crm-relay/server:release", "--outputStyle=stream"], ROOT, log, NX_ENV)
    const built = Path.join(ROOT, "release", "crm-relay")
    yield* say(`new release: ${built} (npm run release, ${((performance.now() - started) / 1000).toFixed(0)} s)`)
    return built
  })

/** `git describe`-like short name of this tree: its commit, and whether it has changes no commit holds. */
export const thisTree = (): { readonly commit: string; readonly dirty: boolean } => ({
  commit: git("rev-parse", "HEAD"),
  dirty: git("status", "--porcelain").length > 0
})
