/**
 * `crm-relay serve` as a child process (the demo and the Zapier app's tests): the workspace's own bin, on
 * an embedded database in `dataDir`, public and internal ports chosen free
 * (port 0, read back from DATA_DIR/server.json). Stopped with SIGTERM (then
 * SIGKILL after 20 s) when the scope closes, whatever ended it.
 */
import { Duration, Effect, Option, Schedule, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

// The bin npm links for the workspace (`npx crm-relay`), however it starts the server.
const BIN = fileURLToPath(new URL("../../../node_modules/.bin/crm-relay", import.meta.url))

const decodeServerFile = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ adminUrl: Schema.String, publicUrl: Schema.String })))

/** A running server. */
export interface RunningServer {
  readonly adminUrl: string
  readonly publicUrl: string
  readonly adminToken: string
}

const tail = (text: string) => text.trim().split("\n").slice(-5).join("\n")

/** Starts the server for the scope; fails with its last output lines when it exits or publishes no address. */
export const startServer = (options: { readonly dataDir: string; readonly env: Record<string, string> }) =>
  Effect.gen(function*() {
    const adminToken = randomBytes(24).toString("base64url")
    const output = { text: "" }
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = ChildProcess.spawn(process.execPath, [BIN, "serve"], {
          stdio: ["ignore", "pipe", "pipe"],
          env: {
            PATH: process.env["PATH"] ?? "",
            HOME: process.env["HOME"] ?? Path.dirname(options.dataDir),
            DATA_DIR: options.dataDir,
            PORT: "0",
            ADMIN_PORT: "0",
            PORTAL_PORT: "0",
            ADMIN_HOST: "127.0.0.1",
            ADMIN_TOKEN: adminToken,
            LOG_LEVEL: "Warning",
            ...options.env
          }
        })
        child.stdout.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
        child.stderr.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
        return child
      }),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        }).pipe(
          Effect.timeout(Duration.seconds(20)),
          Effect.catchAll(() => Effect.sync(() => child.kill("SIGKILL")))
        )
    )
    const exited = Effect.async<never, Error>((resume) => {
      const fail = () => resume(Effect.fail(new Error(`crm-relay serve exited (code ${child.exitCode}) before it listened:\n${tail(output.text)}`)))
      if (child.exitCode !== null || child.signalCode !== null) return fail()
      child.once("exit", fail)
    })
    const published = Effect.suspend(() =>
      Option.liftThrowable(() => Fs.readFileSync(Path.join(options.dataDir, "server.json"), "utf8"))().pipe(
        Option.flatMap(decodeServerFile),
        Option.match({ onNone: () => Effect.fail(new Error("no server.json yet")), onSome: Effect.succeed })
      )
    ).pipe(
      Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(Duration.seconds(180)))),
      Effect.mapError(() => new Error(`crm-relay serve published no address within 180 s:\n${tail(output.text)}`))
    )
    const addresses = yield* Effect.raceFirst(published, exited)
    return { ...addresses, adminToken } satisfies RunningServer
  })
