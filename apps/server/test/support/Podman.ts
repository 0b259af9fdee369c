/**
 * Podman as this test harness runs it: Debian's podman and runc, and a base
 * image made from Debian's packages (mmdebstrap: no registry is reachable),
 * imported under the name the Containerfile uses. The settings that make
 * podman work on a machine like the CI's (runc, cgroupfs, host network, no
 * default ulimits) are here, never in the Containerfile, which builds
 * unchanged with Docker or Podman elsewhere. Podman's storage and the base
 * image's tarball (slow to make: it is kept per day) live under the OS
 * temporary directory, outside the repository.
 */
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { exec } from "./Release.js"

const home = Path.join(Os.tmpdir(), `crm-relay-podman-${process.getuid?.() ?? "user"}`)
const conf = Path.join(home, "containers.conf")
const global = ["--root", Path.join(home, "root"), "--runroot", Path.join(home, "run"), "--runtime", "runc", "--cgroup-manager=cgroupfs"]

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `podman ...args` to completion (bounded: a hang fails the test instead of holding it). */
export const podman = (args: ReadonlyArray<string>): Effect.Effect<Run> =>
  Effect.async<Run>((resume) => {
    Fs.mkdirSync(home, { recursive: true, mode: 0o700 })
    if (!Fs.existsSync(conf)) Fs.writeFileSync(conf, "[containers]\ndefault_ulimits = []\n")
    const child = ChildProcess.execFile("podman", [...global, ...args], { env: { ...process.env, CONTAINERS_CONF: conf }, timeout: 900_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** `podman ...args`, which must succeed; its standard output, trimmed. */
export const podmanOk = (args: ReadonlyArray<string>): Effect.Effect<string> =>
  Effect.flatMap(podman(args), (run) =>
    run.code === 0 ? Effect.succeed(run.stdout.trim()) : Effect.dieMessage(`podman ${args.join(" ")} failed (${run.code}):\n${run.stderr}`))

/** The Debian bookworm minbase tarball of today, made once a day with mmdebstrap (from the configured apt mirror). */
const baseTarball = Effect.gen(function*() {
  const tarball = Path.join(Os.tmpdir(), `crm-relay-bookworm-minbase-${new Date().toISOString().slice(0, 10)}.tar`)
  if (!Fs.existsSync(tarball)) {
    const staging = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-mmdebstrap-"))
    yield* Effect.ensuring(
      Effect.zipRight(
        exec("mmdebstrap", ["--variant=minbase", "--quiet", "bookworm", Path.join(staging, "base.tar")]),
        Effect.sync(() => Fs.renameSync(Path.join(staging, "base.tar"), tarball))
      ),
      Effect.sync(() => Fs.rmSync(staging, { recursive: true, force: true }))
    )
  }
  return tarball
})

/** Imports the base under the Containerfile's name and builds `deploy/Containerfile` from `context`, tagged `tag`. */
export const buildImage = (root: string, context: string, tag: string) =>
  Effect.gen(function*() {
    const tarball = yield* baseTarball
    yield* podmanOk(["import", "--quiet", tarball, "docker.io/library/debian:bookworm-slim"])
    yield* podmanOk(["build", "--quiet", "--pull=never", "--network=host", "-f", Path.join(root, "deploy", "Containerfile"), "-t", tag, context])
    return tag
  })
