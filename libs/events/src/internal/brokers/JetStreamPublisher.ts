/**
 * Publishes deliveries to a NATS JetStream subject (@nats-io/transport-node
 * and @nats-io/jetstream): the publish ack is the receipt, `Nats-Msg-Id` is
 * the `webhook-id` so JetStream drops a redelivery inside its duplicate
 * window, and the Standard Webhooks headers travel as NATS headers. No
 * stream for the subject is a permanent failure; anything else that stops
 * the ack is transient.
 *
 * One connection per publisher, to the pinned address `BrokerEgress`
 * answered (TLS verifies the URL's host; servers the cluster advertises are
 * ignored, they did not pass egress), opened again after the client gives up.
 */
import { BrokerEgress, type BrokerTarget } from "@crm-relay/bridge"
import type { NatsConfig, NatsCredentials } from "@crm-relay/contract/Destinations/Nats"
import { jetstream, type JetStreamClient, jetstreamManager } from "@nats-io/jetstream"
import { headers as natsHeaders, type NatsConnection, type NodeConnectionOptions } from "@nats-io/transport-node"
import type { Scope } from "effect"
import { Effect, Redacted } from "effect"
import * as tls from "node:tls"
import {
  type BrokerMessage,
  CheckOutcome,
  DEFAULT_TIMEOUT_MS,
  describeError,
  type PublisherOptions,
  PublishOutcome,
  connectOnce,
  publishVia,
  sentence
} from "./BrokerMessage.js"
import * as NatsConnect from "./NatsConnect.js"

/** A publisher bound to one destination's subject. */
export interface JetStreamPublisher {
  /** Publishes one message and waits for JetStream's ack. */
  readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome>
}

interface Open {
  readonly connection: NatsConnection
  readonly js: JetStreamClient
}

const where = (target: BrokerTarget) => `the NATS server at ${target.host}:${target.port}`

const connectFailure = (target: BrokerTarget, error: unknown): string => {
  const text = describeError(error)
  const cause = error instanceof Error && error.cause !== undefined ? describeError(error.cause) : ""
  const all = `${text} ${cause}`
  if (/authorization|authentication/i.test(all)) return `${where(target)} refused the credentials (wrong user name, password or token)`
  if (/ECONNREFUSED|connection refused/i.test(all)) return `${where(target)} refused the connection (ECONNREFUSED)`
  if (/tls|certificate|CERT_/i.test(all)) return `TLS with ${where(target)} failed: ${text}`
  if (/timeout/i.test(all)) return `${where(target)} did not answer in time`
  return `connecting to ${where(target)} failed: ${text}`
}

// IPv6 addresses are bracketed in a server URL.
const serverOf = (target: BrokerTarget) => `${target.address.includes(":") ? `[${target.address}]` : target.address}:${target.port}`

const connectOptions = (target: BrokerTarget, credentials: NatsCredentials, options: PublisherOptions): NodeConnectionOptions => {
  // The client spreads these into tls.connect: `servername` is not in its type but is passed on.
  const tlsOptions: NonNullable<NodeConnectionOptions["tls"]> & { readonly servername?: string } = {
    ...(target.servername === undefined ? {} : { servername: target.servername }),
    ...(options.extraCa === undefined ? {} : { ca: [...tls.getCACertificates("default"), ...options.extraCa].join("\n") })
  }
  return {
    servers: [serverOf(target)],
    name: "crm-relay",
    timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    // Only the pinned address: addresses the server gossips have not been through egress.
    ignoreClusterUpdates: true,
    noRandomize: true,
    reconnectTimeWait: 1000,
    // Otherwise every request builds two Errors up front (stack captured) for a failure that seldom
    // comes: a third of a publish's CPU in a profile of npm run bench:destinations. Failures are
    // read by their class and message only (ackFailure).
    noAsyncTraces: true,
    // The client passes these to tls.connect: SNI and verification use the URL's host, not the pinned address.
    tls: target.tls ? tlsOptions : null,
    ...(credentials._tag === "UserPassword"
      ? { user: credentials.user, pass: Redacted.value(credentials.password) }
      : { token: Redacted.value(credentials.token) })
  }
}

/**
 * Connects within the client's `timeout` (an attempt given up closes its socket: NatsConnect). A
 * connection that completes after the caller was interrupted is closed, not left open unowned.
 */
const open = (target: BrokerTarget, credentials: NatsCredentials, options: PublisherOptions) =>
  Effect.async<NatsConnection, string>((resume) => {
    let abandoned = false
    NatsConnect.connect(connectOptions(target, credentials, options)).then(
      (connection) => (abandoned ? void connection.close().catch(() => {}) : resume(Effect.succeed(connection))),
      (error: unknown) => (abandoned ? undefined : resume(Effect.fail(connectFailure(target, error))))
    )
    return Effect.sync(() => void (abandoned = true))
  })

const closeQuietly = (connection: NatsConnection) => Effect.promise(() => connection.close().catch(() => {}))

/** Why the ack did not come, read from the client's error. */
const ackFailure = (error: unknown): string => {
  const name = error instanceof Error ? error.constructor.name : ""
  if (name === "TimeoutError") return "JetStream did not acknowledge the message in time"
  if (name === "ClosedConnectionError" || name === "DrainingConnectionError") return "the connection to the NATS server was lost"
  return `JetStream did not acknowledge the message: ${describeError(error)}`
}

/** A publisher for one NATS JetStream destination; its connection closes with the scope. */
export const make = Effect.fn("JetStreamPublisher.make")(function*(
  config: NatsConfig,
  credentials: NatsCredentials,
  options: PublisherOptions = {}
): Effect.fn.Return<JetStreamPublisher, never, BrokerEgress | Scope.Scope> {
  const egress = yield* BrokerEgress
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  let current: Open | undefined
  yield* Effect.addFinalizer(() => Effect.suspend(() => (current === undefined ? Effect.void : closeQuietly(current.connection))))

  // The client reconnects by itself for a while; once it has given up (closed), the next publish connects anew.
  const reconnect: Effect.Effect<Open, PublishOutcome> = yield* connectOnce(Effect.gen(function*() {
    if (current !== undefined && !current.connection.isClosed()) return current
    current = undefined
    const target = yield* egress.resolve("nats", config.url).pipe(
      Effect.mapError((error) =>
        error._tag === "EgressRefused"
          ? PublishOutcome.Permanent({ reason: error.message })
          : PublishOutcome.Transient({ reason: error.message })
      )
    )
    const opened = yield* open(target, credentials, options).pipe(Effect.mapError((reason) => PublishOutcome.Transient({ reason })))
    current = { connection: opened, js: jetstream(opened, { timeout: timeoutMs }) }
    return current
  }))

  // The open connection without waiting on a reconnect: the common case costs nothing.
  const connection = Effect.suspend(() =>
    current !== undefined && !current.connection.isClosed() ? Effect.succeed(current) : reconnect
  )

  // No responders: no stream captures the subject, or JetStream itself is off. Asking tells which.
  const noResponders = (state: Open) =>
    Effect.promise(() =>
      jetstreamManager(state.connection, { timeout: timeoutMs })
        .then((jsm) => jsm.streams.find(config.subject))
        .then(
          (stream) => PublishOutcome.Transient({ reason: `the stream ${stream} did not answer for subject ${config.subject}` }),
          (error: unknown) =>
            /no stream matches/i.test(describeError(error))
              ? PublishOutcome.Permanent({ reason: `no JetStream stream captures the subject ${config.subject}` })
              : PublishOutcome.Transient({ reason: `JetStream is not available on the NATS server: ${describeError(error)}` })
        )
    )

  const publishOn = (state: Open, message: BrokerMessage) =>
    Effect.promise(() => {
      const headers = natsHeaders()
      for (const [name, value] of Object.entries(message.headers)) headers.set(name, value)
      return state.js.publish(config.subject, message.body, { msgID: message.messageId, headers, timeout: timeoutMs }).then(
        () => ({ ok: true as const }),
        (error: unknown) => ({ ok: false as const, error })
      )
    }).pipe(
      Effect.flatMap((result): Effect.Effect<PublishOutcome> => {
        if (result.ok) return Effect.succeed(PublishOutcome.Delivered())
        const name = result.error instanceof Error ? result.error.constructor.name : ""
        return name === "JetStreamNotEnabled" || name === "NoRespondersError"
          ? noResponders(state)
          : Effect.succeed(PublishOutcome.Transient({ reason: ackFailure(result.error) }))
      })
    )

  // The client's request timeout bounds the ack and `timeout` the connect, so no racing timer here; and
  // no span per message: the delivery attempt that calls this has one (npm run bench:destinations).
  const publish = publishVia(connection, publishOn)

  return { publish }
})

/**
 * Checks a destination before it is stored: the server is reachable, the
 * credentials work, JetStream is on and a stream captures the subject.
 */
export const check = Effect.fn("JetStreamPublisher.check")(function*(
  config: NatsConfig,
  credentials: NatsCredentials,
  options: PublisherOptions = {}
): Effect.fn.Return<CheckOutcome, never, BrokerEgress> {
  const egress = yield* BrokerEgress
  const target = yield* Effect.either(egress.resolve("nats", config.url))
  if (target._tag === "Left") return CheckOutcome.Refused({ reason: target.left.message })
  const opened = yield* Effect.either(open(target.right, credentials, options))
  if (opened._tag === "Left") return CheckOutcome.Refused({ reason: sentence(opened.left) })
  const connection = opened.right
  const verdict = yield* Effect.promise(() =>
    jetstreamManager(connection, { timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS }).then(
      (jsm) =>
        jsm.streams.find(config.subject).then(
          (stream) =>
            config.stream === undefined || stream === config.stream
              ? CheckOutcome.Ok()
              : CheckOutcome.Refused({
                reason: `The subject ${config.subject} is captured by the stream ${stream} on ${where(target.right)}, not ${config.stream}.`
              }),
          (error: unknown) =>
            CheckOutcome.Refused({
              reason: /no stream matches/i.test(describeError(error))
                ? `No JetStream stream on ${where(target.right)} captures the subject ${config.subject}.`
                : sentence(`looking up the stream for ${config.subject} failed: ${describeError(error)}`)
            })
        ),
      (error: unknown) => CheckOutcome.Refused({ reason: sentence(`JetStream is not available on ${where(target.right)}: ${describeError(error)}`) })
    )
  )
  yield* closeQuietly(connection)
  return verdict
})
