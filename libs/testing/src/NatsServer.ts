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
import * as Net from "node:net"
import * as Path from "node:path"
import * as Tls from "node:tls"
import * as BrokerProcess from "./BrokerProcess.js"
import type { BrokerUnavailable, Child } from "./BrokerProcess.js"
import type { TlsMaterial } from "./Certificate.js"

/** A running private NATS server with JetStream. */
export interface NatsServer {
  readonly port: number
  /** `nats://127.0.0.1:<port>` (plain: tests allow loopback through EGRESS_ALLOW_PRIVATE). */
  readonly url: string
  readonly user: string
  readonly password: string
  /** Whether the server requires TLS (started with TLS material); then connect with `tls://`. */
  readonly tls: boolean
  /** Stops the server (SIGTERM); its JetStream store stays. */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and store; waits until it is ready. */
  readonly start: Effect.Effect<void, BrokerUnavailable>
}

/** Starts a private NATS server for the scope; fails with a sentence naming the package when it is not installed. */
export const start: Effect.Effect<NatsServer, BrokerUnavailable, Scope.Scope> = Effect.suspend(() => startWith())

/** `start`, requiring TLS with `tls` (a server certificate and key) when given. */
export const startWith = (options: { readonly tls?: TlsMaterial } = {}) => Effect.gen(function*() {
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
      `authorization { user: "${user}", password: "${password}" }`,
      ...(options.tls === undefined ? [] : [
        `tls { cert_file: ${JSON.stringify(writePem(dir, "cert.pem", options.tls.cert))}, key_file: ${JSON.stringify(writePem(dir, "key.pem", options.tls.key))} }`
      ])
    ].join("\n") + "\n"
  )
  const hello = `CONNECT ${JSON.stringify({ verbose: false, pedantic: false, user, pass: password })}\r\nPING\r\n`

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
    yield* BrokerProcess.waitReady("nats-server", child, ping(port, hello, options.tls !== undefined))
  })
  yield* Effect.addFinalizer(() => stop)
  yield* startServer
  return {
    port,
    url: `${options.tls === undefined ? "nats" : "tls"}://127.0.0.1:${port}`,
    user,
    password,
    tls: options.tls !== undefined,
    stop,
    start: startServer
  } satisfies NatsServer
})

const writePem = (dir: string, name: string, pem: string) => {
  const file = Path.join(dir, name)
  Fs.writeFileSync(file, pem, { mode: 0o600 })
  return file
}

/**
 * Whether the server answers PING with PONG to an authenticated client: the
 * server speaks first (INFO, in plain text), then, when it requires TLS, the
 * client upgrades the same connection before CONNECT.
 */
const ping = (port: number, hello: string, tls: boolean) =>
  Effect.async<boolean>((resume) => {
    let done = false
    let text = ""
    let upgraded = false
    const plain = Net.connect({ host: "127.0.0.1", port })
    let active: Net.Socket = plain
    const finish = (ok: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      active.destroy()
      plain.destroy()
      resume(Effect.succeed(ok))
    }
    const timer = setTimeout(() => finish(false), 5000)
    const onData = (chunk: Buffer) => {
      text += chunk.toString()
      if (text.includes("PONG\r\n")) return finish(true)
      if (text.includes("-ERR")) return finish(false)
      if (!text.startsWith("INFO ") || !text.includes("\r\n") || upgraded) return
      upgraded = true
      if (!tls) return void plain.write(hello)
      plain.removeListener("data", onData)
      text = ""
      // Readiness only: the certificate is the test's own, verified by the clients under test.
      const secure = Tls.connect({ socket: plain, rejectUnauthorized: false }, () => secure.write(hello))
      active = secure
      secure.on("data", onData)
      secure.on("error", () => finish(false))
    }
    plain.on("data", onData)
    plain.on("error", () => finish(false))
    plain.on("close", () => finish(false))
    return Effect.sync(() => finish(false))
  })
