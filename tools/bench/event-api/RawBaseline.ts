/**
 * Runs the raw `node:http` + `pg` baseline (RawServer.ts) as a child
 * process for the scope, on the benchmark's database, and answers its pid
 * and URL once it listens.
 */
import { Effect, Redacted, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { ServerNotListening } from "../support/ServerProcess.js"

const SCRIPT = fileURLToPath(new URL("./RawServer.ts", import.meta.url))

/** A running baseline: its pid and base URL. */
export interface RawServer {
  readonly pid: number
  readonly url: string
}

/** The baseline for the scope, with a pool of `pool` connections and `sample` as the empty-account answer. */
export const serveRaw = (options: {
  readonly databaseUrl: Redacted.Redacted
  readonly pool: number
  readonly sample: string
}): Effect.Effect<RawServer, ServerNotListening, Scope.Scope> =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, ["--import", import.meta.resolve("tsx"), SCRIPT], {
          stdio: ["ignore", "pipe", "inherit"],
          env: {
            PATH: process.env["PATH"] ?? "",
            DATABASE_URL: Redacted.value(options.databaseUrl),
            DATABASE_POOL_SIZE: String(options.pool),
            SAMPLE: options.sample
          }
        })
      ),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        }).pipe(Effect.timeout("10 seconds"), Effect.ignore)
    )
    const port = yield* Effect.async<number, ServerNotListening>((resume) => {
      let text = ""
      const onData = (chunk: Buffer) => {
        text += chunk.toString("utf8")
        const end = text.indexOf("\n")
        if (end === -1) return
        child.stdout.off("data", onData)
        child.off("exit", onExit)
        child.stdout.resume()
        resume(Effect.succeed(Number((JSON.parse(text.slice(0, end)) as { port: number }).port)))
      }
      const onExit = (code: number | null) =>
        resume(Effect.fail(new ServerNotListening({ message: `the raw baseline exited (code ${code}) before it listened; its errors are above.` })))
      child.stdout.on("data", onData)
      child.once("exit", onExit)
    }).pipe(
      Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new ServerNotListening({ message: "the raw baseline did not listen within 60 s." }) })
    )
    return { pid: child.pid!, url: `http://127.0.0.1:${port}` }
  })
