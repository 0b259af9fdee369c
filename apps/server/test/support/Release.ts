/**
 * The release (`npm run release`: release/ at the repository's root), made
 * through Nx (cached when nothing changed), and the executable run as an
 * operator would: alone, from an empty folder, with no Node on PATH, as an
 * unprivileged user (nobody, when the tests run as root).
 */
import { Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

export const ROOT = Path.join(import.meta.dirname, "..", "..", "..", "..")
export const RELEASE = Path.join(ROOT, "release")

/** `command ...args`, its output on the test's own; dies when it fails. Never blocks the worker (vitest talks to it meanwhile). */
export const exec = (command: string, args: ReadonlyArray<string>, cwd = ROOT): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const child = ChildProcess.spawn(command, args, { cwd, stdio: ["ignore", "inherit", "inherit"] })
    child.on("exit", (code) => resume(code === 0 ? Effect.void : Effect.dieMessage(`${command} ${args.join(" ")} failed (${code})`)))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const lockFile = Path.join(ROOT, "release.lock")
const lockHolderAlive = (): boolean => {
  try {
    process.kill(Number(Fs.readFileSync(lockFile, "utf8")), 0)
    return true
  } catch {
    return false
  }
}
/** Holds the release's lock for the effect: the release and image tests run in parallel workers, and one release writes release/ at a time. */
const withLock = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(
    Effect.async<void>((resume) => {
      const attempt = (): void => {
        try {
          Fs.writeFileSync(lockFile, String(process.pid), { flag: "wx" })
          resume(Effect.void)
        } catch {
          // A holder that died (SIGKILL) leaves its lock behind: taken over.
          if (!lockHolderAlive()) Fs.rmSync(lockFile, { force: true })
          timer = setTimeout(attempt, 200)
        }
      }
      let timer = setTimeout(attempt, 0)
      return Effect.sync(() => clearTimeout(timer))
    }),
    () => effect,
    () => Effect.sync(() => Fs.rmSync(lockFile, { force: true }))
  )

/** Builds the release through Nx (the build first; cached when nothing changed). */
export const release: Effect.Effect<void> = withLock(
  exec(process.execPath, [Path.join(ROOT, "node_modules", ".bin", "nx"), "run", "@crm-relay/server:release", "--outputStyle=stream"])
)

/** The user the executable runs as: nobody when the tests run as root, else the tests' own. */
export const user: { readonly uid: number; readonly gid: number } | undefined = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined

/** Gives `path` to the executable's user (when it is not the tests' own). */
export const giveToUser = (path: string): void => {
  if (user !== undefined) Fs.chownSync(path, user.uid, user.gid)
}

/** The environment: `env` and nothing else, PATH an empty folder's (no node, no npm). */
export const bareEnv = (folder: string, env: Record<string, string>): Record<string, string> => ({
  PATH: Path.join(folder, "empty-path"),
  HOME: folder,
  ...env
})

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const spawnOptions = (folder: string, env: Record<string, string>) => ({ cwd: folder, env: bareEnv(folder, env), ...(user ?? {}) })

/** `crm-relay ...args` in `folder`, to completion. */
export const run = (folder: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): Effect.Effect<Run> =>
  Effect.async<Run>((resume) => {
    const child = ChildProcess.execFile(Path.join(folder, "crm-relay"), args, { ...spawnOptions(folder, env), timeout: 600_000 }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** `crm-relay serve` in `folder` for the scope (SIGKILLed at the end if still running). */
export const serve = (folder: string, env: Record<string, string>): Effect.Effect<{
  readonly stderr: () => string
  readonly terminate: Effect.Effect<number | null>
}, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        const child = ChildProcess.spawn(Path.join(folder, "crm-relay"), ["serve"], { ...spawnOptions(folder, env), stdio: ["ignore", "ignore", "pipe"] })
        let stderr = ""
        child.stderr.on("data", (chunk) => (stderr += chunk))
        const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
        return { child, exited, stderr: () => stderr }
      }),
      ({ child }) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    ),
    ({ child, exited, stderr }) => ({ stderr, terminate: Effect.zipRight(Effect.sync(() => child.kill("SIGTERM")), Effect.promise(() => exited)) })
  )

/** A folder with the executable alone in it (and an empty folder for PATH), for the scope's user. */
export const emptyFolderWithExecutable = (folder: string): string => {
  Fs.chmodSync(folder, 0o755)
  Fs.mkdirSync(Path.join(folder, "empty-path"))
  Fs.copyFileSync(Path.join(RELEASE, "crm-relay"), Path.join(folder, "crm-relay"))
  Fs.chmodSync(Path.join(folder, "crm-relay"), 0o755)
  giveToUser(folder)
  return Path.join(folder, "crm-relay")
}
