/**
 * A small filesystem for a server's DATA_DIR: a tmpfs mounted in a mount
 * namespace of its own, so nothing outside the test sees it. A `cat` reading
 * the test's pipe holds the namespace: it goes when the test does, however
 * that ends. The test reaches the files through /proc/<holder>/root and
 * starts servers inside it with nsenter. Needs root (CI runs as root):
 * without it, the test fails saying so.
 */
import { Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { childEnv } from "./Cli.js"
import { tempDir } from "./TempDir.js"

/** A mounted small disk. */
export interface SmallDisk {
  /** The mount point, as processes inside the namespace see it (use it as DATA_DIR). */
  readonly dir: string
  /** The same directory from the test's side. */
  readonly outside: string
  /** The command prefix that runs a program inside the namespace. */
  readonly enter: ReadonlyArray<string>
  /** Writes a filler file beside DATA_DIR until the disk has no space left; its size in bytes. */
  readonly fill: Effect.Effect<number>
  /** Removes the filler. */
  readonly free: Effect.Effect<void>
}

const NEEDS = "This test needs root and util-linux's unshare and nsenter: it mounts a small tmpfs (mount -t tmpfs) " +
  "in a mount namespace of its own (unshare --mount), as CI runs it"

/** A tmpfs of `sizeMiB` MiB for the scope. */
export const make = (sizeMiB: number): Effect.Effect<SmallDisk, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (process.getuid?.() !== 0) return yield* Effect.dieMessage(`${NEEDS}; this process is not root.`)
    const dir = yield* tempDir("crm-relay-small-disk-")
    const holder = yield* Effect.acquireRelease(
      Effect.async<ChildProcess.ChildProcess>((resume) => {
        const child = ChildProcess.spawn(
          "unshare",
          ["--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs -o size=${sizeMiB}m tmpfs "$1" && echo mounted && exec cat >/dev/null`, "sh", dir],
          // It holds the namespace until its stdin closes: with the test's process, however that ends.
          { env: childEnv({}), stdio: ["pipe", "pipe", "pipe"] }
        )
        let stderr = ""
        child.stderr.on("data", (chunk) => (stderr += chunk))
        child.stdout.once("data", () => resume(Effect.succeed(child)))
        child.once("error", (error) => resume(Effect.dieMessage(`${NEEDS}: ${error.message}.`)))
        child.once("exit", () => resume(Effect.dieMessage(`${NEEDS}: ${stderr.trim() || "the mount failed"}.`)))
      }),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    const outside = `/proc/${holder.pid}/root${dir}`
    const filler = Path.join(outside, "filler")
    return {
      dir,
      outside,
      enter: ["nsenter", `--target=${holder.pid}`, "--mount", "--"],
      fill: Effect.sync(() => {
        const fd = Fs.openSync(filler, "w")
        let written = 0
        try {
          // Large writes first, then small ones for what is left.
          for (const size of [1 << 20, 4096]) {
            const chunk = Buffer.alloc(size, 1)
            try {
              for (;;) written += Fs.writeSync(fd, chunk)
            } catch (error) {
              if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error
            }
          }
        } finally {
          Fs.closeSync(fd)
        }
        return written
      }),
      free: Effect.sync(() => Fs.rmSync(filler, { force: true }))
    }
  })
