/**
 * What the private broker servers of the tests share: finding the Debian
 * program (or saying which package is missing), a free loopback port, a child
 * process stopped by its own id, and readiness by a protocol-level probe,
 * never by a sleep.
 */
import { Data, Duration, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { HANG_BOUND, pause } from "./Eventually.js"

/** A broker could not be started: a missing package, or a server that exited or never answered. */
export class BrokerUnavailable extends Data.TaggedError("BrokerUnavailable")<{ readonly message: string }> {}

/**
 * The absolute path of `program`: the first of `candidates` (globs of one
 * `*` per path segment allowed) or of the PATH that exists. Fails with a
 * sentence naming the Debian `pkg` when none does.
 */
export const findProgram = (program: string, pkg: string, candidates: ReadonlyArray<string> = []) =>
  Effect.suspend(() => {
    const fromPath = (process.env["PATH"] ?? "").split(":").filter((dir) => dir !== "").map((dir) => Path.join(dir, program))
    const expanded = [...candidates.flatMap(expand), ...fromPath, Path.join("/usr/sbin", program)]
    const found = expanded.find((file) => Fs.existsSync(file))
    return found === undefined
      ? Effect.fail(
        new BrokerUnavailable({
          message: `The program ${program} was not found: install the Debian package ${pkg} (apt-get install ${pkg}).`
        })
      )
      : Effect.succeed(found)
  })

// Expands `*` in a path, one directory level per star, in sorted order.
const expand = (pattern: string): ReadonlyArray<string> => {
  const star = pattern.indexOf("*")
  if (star < 0) return [pattern]
  const dir = Path.dirname(pattern.slice(0, star + 1))
  const segmentEnd = pattern.indexOf("/", star)
  const segment = pattern.slice(dir.length + 1, segmentEnd < 0 ? undefined : segmentEnd)
  const rest = segmentEnd < 0 ? "" : pattern.slice(segmentEnd)
  const matcher = new RegExp(`^${segment.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`)
  const entries = Fs.existsSync(dir) ? Fs.readdirSync(dir).filter((entry) => matcher.test(entry)).sort() : []
  return entries.flatMap((entry) => expand(`${dir}/${entry}${rest}`))
}

/** A loopback TCP port nothing listens on now (the kernel's choice for port 0). */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** A child process whose output is kept for error messages. */
export interface Child {
  readonly process: ChildProcess.ChildProcess
  readonly exited: () => boolean
  /** The last lines the process printed. */
  readonly tail: () => string
}

/** Spawns `command` in a process group of its own, so a stuck one can be killed whole by its id. */
export const spawn = (command: string, args: ReadonlyArray<string>, options: { readonly env: Record<string, string>; readonly cwd: string }) =>
  Effect.sync((): Child => {
    const child = ChildProcess.spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000))
    child.stdout?.on("data", keep)
    child.stderr?.on("data", keep)
    child.on("error", (error) => (output += `\n${error.message}`))
    return {
      process: child,
      exited: () => child.exitCode !== null || child.signalCode !== null,
      tail: () => output.trim().split("\n").slice(-8).join("\n")
    }
  })

/** Stops a child: SIGTERM (the servers stop cleanly on it), then SIGKILL to its group after `grace`. */
export const stop = (child: Child, grace: Duration.DurationInput = Duration.minutes(1)) =>
  Effect.async<void>((resume) => {
    if (child.exited()) return resume(Effect.void)
    child.process.once("exit", () => resume(Effect.void))
    child.process.kill("SIGTERM")
  }).pipe(
    Effect.timeout(grace),
    Effect.catchAll(() =>
      Effect.sync(() => {
        const pid = child.process.pid
        if (pid !== undefined && !child.exited()) process.kill(-pid, "SIGKILL")
      })
    )
  )

/**
 * Polls `probe` until it answers true; fails with the child's last lines when
 * the child exits first or nothing answered within the hang bound.
 */
export const waitReady = (name: string, child: Child, probe: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(HANG_BOUND)
    while (Date.now() < deadline) {
      if (child.exited()) {
        return yield* new BrokerUnavailable({ message: `${name} exited before it was ready: ${child.tail()}` })
      }
      if (yield* probe) return
      yield* pause(100)
    }
    return yield* new BrokerUnavailable({ message: `${name} was not ready within ${Duration.format(HANG_BOUND)}: ${child.tail()}` })
  })

/**
 * Opens a loopback connection to `port`, writes `hello`, and answers whether
 * the bytes read back satisfy `answered` before the server closes or 5 s pass.
 */
export const exchange = (port: number, hello: Uint8Array, answered: (received: Buffer) => boolean | undefined) =>
  Effect.async<boolean>((resume) => {
    let received = Buffer.alloc(0)
    let done = false
    const socket = Net.connect({ host: "127.0.0.1", port })
    const finish = (ok: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed(ok))
    }
    const timer = setTimeout(() => finish(false), 5000)
    socket.on("connect", () => socket.write(hello))
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const verdict = answered(received)
      if (verdict !== undefined) finish(verdict)
    })
    socket.on("error", () => finish(false))
    socket.on("close", () => finish(false))
    return Effect.sync(() => finish(false))
  })

/** Whether something accepts connections on loopback `port` (for servers that speak only when spoken to properly). */
export const isListening = (port: number) =>
  Effect.async<boolean>((resume) => {
    const socket = Net.connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
  })

/** A temporary directory for the scope, removed when it closes. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
