/**
 * Runs the crm-relay binary as a child process (the Node running the tests,
 * Node 24 under npm scripts), as an operator would.
 */
import { Duration, Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"

/** The `bin` of @crm-relay/server. */
export const BIN = fileURLToPath(new URL("../../bin/crm-relay.js", import.meta.url))

/**
 * Bounds against a hang for tests that start processes: each start loads tsx
 * and the server, which takes seconds on a quiet machine and many times that
 * on a loaded one. Never a measure of speed.
 */
export const PROCESS_TEST_TIMEOUT = 1_800_000

/** How long a started `serve` may take to write its server file (it migrates and listens first). */
export const SERVE_START_BOUND = Duration.minutes(10)

/** How long one CLI command may run before it is taken for hung and killed. */
const COMMAND_BOUND = Duration.minutes(10)

/** The environment of a child: only what it needs, plus `env`. */
export const childEnv = (env: Record<string, string>): Record<string, string> => ({
  PATH: process.env["PATH"] ?? "",
  HOME: process.env["HOME"] ?? "/tmp",
  ...env
})

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `crm-relay ...args` to completion, with `stdin` written to its standard input. */
export const cli = (args: ReadonlyArray<string>, env: Record<string, string>, stdin = ""): Effect.Effect<Run> =>
  Effect.async<Run>((resume) => {
    const child = ChildProcess.execFile(
      process.execPath,
      [BIN, ...args],
      { env: childEnv(env), timeout: Duration.toMillis(COMMAND_BOUND) },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resume(Effect.succeed({ code, stdout, stderr }))
      }
    )
    child.stdin?.end(stdin)
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A `crm-relay serve` child for the scope (SIGKILLed at the end if still running). */
export interface ServeProcess {
  readonly pid: number
  /** Output so far. */
  readonly stdout: () => string
  readonly stderr: () => string
  /** Sends SIGTERM and waits for the exit code. */
  readonly terminate: Effect.Effect<number | null>
  /** Closes the reading end of its stdout (as `crm-relay serve | head` does once head has its lines). */
  readonly closeStdout: Effect.Effect<void>
  /** Waits for the exit code. */
  readonly exited: Effect.Effect<number | null>
}

/**
 * `crm-relay serve` with `env`; every listener on a free port unless `env` names one (the
 * README walkthrough, run beside this suite, needs the default ports). `prefix` runs it through
 * another command (e.g. `nsenter ... --`), which must exec it, so the child is the server.
 */
export const serve = (env: Record<string, string>, prefix: ReadonlyArray<string> = []): Effect.Effect<ServeProcess, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const ports = { PORT: "0", ADMIN_PORT: "0", PORTAL_PORT: "0" }
      const [command, ...args] = [...prefix, process.execPath, BIN, "serve"]
      const child = ChildProcess.spawn(command!, args, { env: childEnv({ ...ports, ...env }), stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk) => (stdout += chunk))
      child.stderr.on("data", (chunk) => (stderr += chunk))
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
      return { child, exited, stdout: () => stdout, stderr: () => stderr }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  ).pipe(
    Effect.map(({ child, exited, stderr, stdout }) => ({
      pid: child.pid!,
      stdout,
      stderr,
      terminate: Effect.zipRight(Effect.sync(() => child.kill("SIGTERM")), Effect.promise(() => exited)),
      closeStdout: Effect.sync(() => child.stdout.destroy()),
      exited: Effect.promise(() => exited)
    }))
  )
