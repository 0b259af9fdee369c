/**
 * A private RabbitMQ (Debian's `rabbitmq-server`) for one test file: its own
 * node name, AMQP and distribution ports, epmd, data, log and config under a
 * temporary folder, so it never meets the system copy (5672, 25672, epmd on
 * 4369). Ready when it answers an AMQP protocol header with Connection.Start.
 * `stop` and `start` (same port, same data) let fault tests take it away.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Scope } from "effect"
import * as BrokerProcess from "./BrokerProcess.js"
import { BrokerUnavailable, type Child } from "./BrokerProcess.js"
import type { TlsMaterial } from "./Certificate.js"

/** A running private RabbitMQ. */
export interface RabbitMqServer {
  readonly port: number
  /** `amqp://127.0.0.1:<port>` (plain: tests allow loopback through EGRESS_ALLOW_PRIVATE). */
  readonly url: string
  /** The one user, allowed everything on the default virtual host "/". */
  readonly user: string
  readonly password: string
  /** The TLS listener's port, when started with TLS material (`amqps://`). */
  readonly tlsPort: number | undefined
  /** Stops the broker (SIGTERM, it shuts down cleanly); its data stays. */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and data; waits until it is ready. */
  readonly start: Effect.Effect<void, BrokerUnavailable>
}

const AMQP_HEADER = Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1])

// The server answers the protocol header with a method frame (type 1) on channel 0 carrying
// Connection.Start (class 10, method 10) once its listener is up.
const connectionStart = (received: Buffer) =>
  received.length < 11 ? undefined : received[0] === 1 && received.readUInt16BE(7) === 10 && received.readUInt16BE(9) === 10

/** Starts a private RabbitMQ for the scope; fails with a sentence naming the package when it is not installed. */
export const start: Effect.Effect<RabbitMqServer, BrokerUnavailable, Scope.Scope> = Effect.suspend(() => startWith())

/** `start`, with an `amqps://` listener too when `tls` (a server certificate and key) is given. */
export const startWith = (options: { readonly tls?: TlsMaterial } = {}) => Effect.gen(function*() {
  const server = yield* BrokerProcess.findProgram("rabbitmq-server", "rabbitmq-server", [
    "/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmq-server"
  ]).pipe(
    // The /usr/sbin wrapper switches to the rabbitmq user and the system's folders: use the real script only.
    Effect.filterOrFail(
      (path) => !path.startsWith("/usr/sbin/"),
      () => new BrokerUnavailable({ message: "The rabbitmq-server scripts were not found under /usr/lib/rabbitmq: install the Debian package rabbitmq-server." })
    )
  )
  const epmd = yield* BrokerProcess.findProgram("epmd", "erlang-base", ["/usr/lib/erlang/erts-*/bin/epmd"])
  const dir = yield* BrokerProcess.tempDir("crm-relay-rabbitmq-")
  const [port, distPort, epmdPort] = [yield* BrokerProcess.freePort, yield* BrokerProcess.freePort, yield* BrokerProcess.freePort]
  const tlsPort = options.tls === undefined ? undefined : yield* BrokerProcess.freePort
  const tlsLines = options.tls === undefined ? [] : [
    `listeners.ssl.1 = 127.0.0.1:${tlsPort}`,
    `ssl_options.cacertfile = ${writePem(dir, "ca.pem", options.tls.ca)}`,
    `ssl_options.certfile = ${writePem(dir, "cert.pem", options.tls.cert)}`,
    `ssl_options.keyfile = ${writePem(dir, "key.pem", options.tls.key)}`,
    "ssl_options.verify = verify_none",
    "ssl_options.fail_if_no_peer_cert = false"
  ]
  const user = "relay"
  const password = randomBytes(12).toString("hex")
  const home = Path.join(dir, "home")
  Fs.mkdirSync(home)
  Fs.writeFileSync(
    Path.join(dir, "rabbitmq.conf"),
    [
      `listeners.tcp.1 = 127.0.0.1:${port}`,
      `default_user = ${user}`,
      `default_pass = ${password}`,
      "loopback_users = none",
      // Tests fill no disk worth speaking of; the default alarm would block publishers on a full /tmp.
      "disk_free_limit.absolute = 1MB",
      ...tlsLines
    ].join("\n") + "\n"
  )
  Fs.writeFileSync(Path.join(dir, "enabled_plugins"), "[].\n")
  const env = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: home,
    ERL_EPMD_PORT: String(epmdPort),
    ERL_EPMD_ADDRESS: "127.0.0.1",
    RABBITMQ_NODENAME: `crm-relay-test-${randomBytes(6).toString("hex")}@localhost`,
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: Path.join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: Path.join(dir, "log"),
    RABBITMQ_CONFIG_FILE: Path.join(dir, "rabbitmq.conf"),
    RABBITMQ_ENABLED_PLUGINS_FILE: Path.join(dir, "enabled_plugins"),
    RABBITMQ_LOGS: "-"
  }

  // An epmd of our own on its own port, a child of this process (an epmd started by erl would outlive us).
  const epmdChild = yield* Effect.acquireRelease(
    BrokerProcess.spawn(epmd, ["-port", String(epmdPort)], { env, cwd: dir }),
    (child) => BrokerProcess.stop(child)
  )
  yield* BrokerProcess.waitReady("epmd", epmdChild, BrokerProcess.isListening(epmdPort))

  let current: Child | undefined
  const stop = Effect.suspend(() => {
    const child = current
    current = undefined
    return child === undefined ? Effect.void : BrokerProcess.stop(child)
  })
  const startServer = Effect.gen(function*() {
    if (current !== undefined && !current.exited()) return
    const child = yield* BrokerProcess.spawn(server, [], { env, cwd: dir })
    current = child
    yield* BrokerProcess.waitReady("rabbitmq-server", child, BrokerProcess.exchange(port, AMQP_HEADER, connectionStart))
  })
  yield* Effect.addFinalizer(() => stop)
  yield* startServer
  return { port, url: `amqp://127.0.0.1:${port}`, user, password, tlsPort, stop, start: startServer } satisfies RabbitMqServer
})

const writePem = (dir: string, name: string, pem: string) => {
  const file = Path.join(dir, name)
  Fs.writeFileSync(file, pem, { mode: 0o600 })
  return file
}
