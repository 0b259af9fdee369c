/**
 * A private NATS server with JetStream (Debian's `nats-server -js`) for one
 * test file: its own loopback port, store folder and config under a temporary
 * folder, never the system copy on 4222. Ready when it answers PING with PONG
 * to an authenticated client. `stop` and `start` (same port, same store) let
 * fault tests take it away.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as BrokerProcess from "./BrokerProcess.js"
import type { BrokerUnavailable, Child } from "./BrokerProcess.js"

/** A running private NATS server with JetStream. */
export interface NatsServer {
  readonly port: number
  /** `nats://127.0.0.1:<port>` (plain: tests allow loopback through EGRESS_ALLOW_PRIVATE). */
  readonly url: string
  readonly user: string
  readonly password: string
  /** Stops the server (SIGTERM); its JetStream store stays. */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and store; waits until it is ready. */
  readonly start: Effect.Effect<void, BrokerUnavailable>
}

/** Starts a private NATS server for the scope; fails with a sentence naming the package when it is not installed. */
export const start: Effect.Effect<NatsServer, BrokerUnavailable, Scope.Scope> = Effect.gen(function*() {
  const program = yield* BrokerProcess.findProgram("nats-server", "nats-server")
  const dir = yield* BrokerProcess.tempDir("crm-relay-nats-")
  const port = yield* BrokerProcess.freePort
  const user = "relay"
  const password = randomBytes(12).toString("hex")
  const config = Path.join(dir, "nats.conf")
  Fs.writeFileSync(
    config,
    [
      `listen: "127.0.0.1:${port}"`,
      // No monitoring, cluster, leaf or gateway listeners: only the client port above.
      `jetstream { store_dir: ${JSON.stringify(Path.join(dir, "store"))} }`,
      `authorization { user: "${user}", password: "${password}" }`
    ].join("\n") + "\n"
  )
  const hello = Buffer.from(`CONNECT ${JSON.stringify({ verbose: false, pedantic: false, user, pass: password })}\r\nPING\r\n`)
  const pong = (received: Buffer) => {
    const text = received.toString()
    if (text.includes("PONG\r\n")) return true
    return text.includes("-ERR") ? false : undefined
  }

  let current: Child | undefined
  const stop = Effect.suspend(() => {
    const child = current
    current = undefined
    return child === undefined ? Effect.void : BrokerProcess.stop(child)
  })
  const startServer = Effect.gen(function*() {
    if (current !== undefined && !current.exited()) return
    const child = yield* BrokerProcess.spawn(program, ["-c", config], { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, cwd: dir })
    current = child
    yield* BrokerProcess.waitReady("nats-server", child, BrokerProcess.exchange(port, hello, pong))
  })
  yield* Effect.addFinalizer(() => stop)
  yield* startServer
  return { port, url: `nats://127.0.0.1:${port}`, user, password, stop, start: startServer } satisfies NatsServer
})
