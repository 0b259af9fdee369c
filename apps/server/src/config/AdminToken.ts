/**
 * The internal API's token: `ADMIN_TOKEN` when set; otherwise (development)
 * a random one generated into `DATA_DIR/admin-token` (mode 0600) and printed
 * once, when generated. The CLI reads the same file to reach a running server.
 */
import { Console, Data, Effect, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The internal API listens beyond loopback with no ADMIN_TOKEN set. */
export class AdminTokenRequired extends Data.TaggedError("AdminTokenRequired")<{ readonly adminHost: string }> {
  override get message() {
    return `ADMIN_TOKEN must be set: ADMIN_HOST is ${this.adminHost}, so the internal API is reachable from other hosts, and a token generated into DATA_DIR is not one their operators were given.`
  }
}

/** Whether `host` is only reachable from this host (a loopback address or name). */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)

/**
 * A generated development token is for an internal API only this host reaches: bound beyond
 * loopback (a container publishes it, say), the server refuses to start without ADMIN_TOKEN.
 */
export const requireForHost = (configured: Option.Option<Redacted.Redacted<string>>, adminHost: string): Effect.Effect<void, AdminTokenRequired> =>
  Option.isNone(configured) && !isLoopback(adminHost) ? Effect.fail(new AdminTokenRequired({ adminHost })) : Effect.void

/** Where a generated token is kept. */
export const tokenFile = (dataDir: string): string => Path.join(dataDir, "admin-token")

/** The stored token, if a readable, non-empty one exists. */
export const read = (dataDir: string): Effect.Effect<Option.Option<Redacted.Redacted<string>>> =>
  Effect.sync(() => {
    try {
      const text = Fs.readFileSync(tokenFile(dataDir), "utf8").trim()
      return text === "" ? Option.none() : Option.some(Redacted.make(text))
    } catch {
      return Option.none()
    }
  })

/** The configured token, or the stored one, or a new one (stored and printed once). */
export const resolve = (
  configured: Option.Option<Redacted.Redacted<string>>,
  dataDir: string
): Effect.Effect<Redacted.Redacted<string>> =>
  Option.match(configured, {
    onSome: Effect.succeed,
    onNone: () =>
      Effect.flatMap(read(dataDir), Option.match({
        onSome: Effect.succeed,
        onNone: () =>
          Effect.gen(function*() {
            const token = randomBytes(32).toString("base64url")
            const file = tokenFile(dataDir)
            yield* Effect.sync(() => {
              Fs.mkdirSync(dataDir, { recursive: true })
              Fs.writeFileSync(file, `${token}\n`, { mode: 0o600 })
            })
            // Printed once, on its own line (not a log record), so it stays out of log pipelines.
            yield* Console.error(`ADMIN_TOKEN was not set: generated one into ${file}\nADMIN_TOKEN=${token}`)
            yield* Effect.logWarning("ADMIN_TOKEN not set; using a generated development token").pipe(
              Effect.annotateLogs("file", file)
            )
            return Redacted.make(token)
          })
      }))
  })
