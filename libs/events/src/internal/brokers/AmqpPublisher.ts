/**
 * Publishes deliveries to a RabbitMQ exchange over AMQP 0-9-1 (amqplib):
 * persistent messages (delivery mode 2) on a confirm channel, `mandatory`
 * so an unroutable message comes back (basic.return) as a permanent failure
 * with the broker's reply text. The message id is the `webhook-id`; the
 * Standard Webhooks headers travel as AMQP headers.
 *
 * One connection per publisher, opened on first use through `BrokerEgress`
 * (the pinned, policy-checked address; TLS verifies the URL's host), and
 * opened again on the next publish after it is lost.
 */
import { BrokerEgress, type BrokerTarget } from "@crm-relay/bridge"
import type { RabbitmqConfig, RabbitmqCredentials } from "@crm-relay/contract/Destinations/Rabbitmq"
import type { Scope } from "effect"
import { Effect, Redacted } from "effect"
import * as amqp from "amqplib"
import * as tls from "node:tls"
import {
  asSentence,
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

/** A publisher bound to one destination's exchange and routing key. */
export interface AmqpPublisher {
  /** Publishes one message and waits for the broker's confirm. */
  readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome>
}

interface Open {
  readonly model: amqp.ChannelModel
  readonly channel: amqp.ConfirmChannel
  /** Reply text of messages the broker returned as unroutable, by message id, until their confirm arrives. */
  readonly returned: Map<string, string>
  /** Why the channel closed, when the broker closed it (e.g. 404 for a missing exchange). */
  closedBy: { readonly code: number; readonly reason: string } | undefined
}

/** Why connecting failed, and whether retrying later may help. */
interface ConnectFailure {
  readonly permanent: boolean
  readonly reason: string
}

const serverCode = (error: unknown): number | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "number" ? error.code : undefined

const systemCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined

// The broker's own words after "with message" are the useful part of amqplib's errors.
const brokerText = (error: unknown) => {
  const text = describeError(error)
  const quoted = /with message "([^"]*)"/.exec(text)
  return quoted?.[1] ?? text
}

const connectFailure = (target: BrokerTarget, user: string, error: unknown): ConnectFailure => {
  const where = `the RabbitMQ broker at ${target.host}:${target.port}`
  const code = systemCode(error)
  const text = describeError(error)
  if (text.includes("ACCESS-REFUSED") || text.includes("ACCESS_REFUSED") || text.includes("403")) {
    return { permanent: false, reason: `${where} refused the user ${user} (wrong user name or password)` }
  }
  if (text.includes("NOT-ALLOWED") || text.includes("530")) {
    return { permanent: false, reason: `${where} does not let ${user} use the virtual host ${target.vhost} (${brokerText(error)})` }
  }
  if (code === "ECONNREFUSED") return { permanent: false, reason: `${where} refused the connection (ECONNREFUSED)` }
  if (code !== undefined && (code.startsWith("ERR_TLS") || code.includes("CERT") || code.startsWith("UNABLE_TO"))) {
    return { permanent: false, reason: `TLS with ${where} failed (${code})` }
  }
  return { permanent: false, reason: `connecting to ${where} failed: ${text}${code === undefined ? "" : ` (${code})`}` }
}

/** The socket under a channel model (amqplib keeps it as `connection.stream`, outside its types). */
const socketOf = (model: amqp.ChannelModel): { readonly destroy: () => void } | undefined => {
  const connection: unknown = model.connection
  if (typeof connection !== "object" || connection === null || !("stream" in connection)) return undefined
  const stream = connection.stream
  return typeof stream === "object" && stream !== null && "destroy" in stream && typeof stream.destroy === "function"
    ? { destroy: () => (stream.destroy as () => void).call(stream) }
    : undefined
}

/**
 * Sends the frames amqplib has queued in one pass as one socket write. amqplib's multiplexer
 * (`connection.muxer`, outside its types) flushes the channels' queued frames once a tick, one
 * `socket.write` per message: with Nagle off that is one syscall and one TCP segment per message,
 * the largest share of a publish's CPU. Corked for the pass, the socket sends them in one `writev`,
 * at once (no Nagle wait). Left as amqplib has it when its internals are not as expected.
 */
const coalesceWrites = (model: amqp.ChannelModel): void => {
  const connection: unknown = model.connection
  if (typeof connection !== "object" || connection === null || !("muxer" in connection) || !("stream" in connection)) return
  const { muxer, stream } = connection
  if (typeof muxer !== "object" || muxer === null || !("_readIncoming" in muxer) || typeof muxer._readIncoming !== "function") return
  if (typeof stream !== "object" || stream === null || !("cork" in stream) || !("uncork" in stream)) return
  const socket = stream as { readonly cork: () => void; readonly uncork: () => void }
  const flush = muxer._readIncoming as (this: unknown) => void
  muxer._readIncoming = function(this: unknown) {
    socket.cork()
    try {
      flush.call(this)
    } finally {
      socket.uncork()
    }
  }
}

/**
 * Opens a connection and a confirm channel to `target`, within `timeoutMs`. An attempt given up (at
 * the timeout, or interrupted) drops its socket: a broker that went silent mid-handshake would never
 * answer a polite close, and each abandoned attempt would keep a file descriptor.
 */
const open = (credentials: RabbitmqCredentials, target: BrokerTarget, options: PublisherOptions) =>
  Effect.async<Open, ConnectFailure>((resume) => {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
    let settled = false
    // Known once the AMQP handshake is done (before it, amqplib's own socket timeout closes the socket).
    let opened: amqp.ChannelModel | undefined
    const settle = (outcome: Effect.Effect<Open, ConnectFailure>) => {
      if (settled) return false
      settled = true
      clearTimeout(timer)
      resume(outcome)
      return true
    }
    const abandon = (outcome: Effect.Effect<Open, ConnectFailure>) => {
      if (settle(outcome) && opened !== undefined) socketOf(opened)?.destroy()
    }
    const timer = setTimeout(
      () => abandon(Effect.fail({ permanent: false, reason: `the RabbitMQ broker at ${target.host}:${target.port} did not complete the connection within ${timeoutMs / 1000} s` })),
      timeoutMs
    )
    const socketOptions: amqp.SocketOptions = {
      timeout: timeoutMs,
      noDelay: true,
      clientProperties: { connection_name: "crm-relay" },
      ...(target.servername === undefined ? {} : { servername: target.servername }),
      ...(options.extraCa === undefined ? {} : { ca: [...tls.getCACertificates("default"), ...options.extraCa] })
    }
    const attempt = (async () => {
      const model = await amqp.connect({
        protocol: target.tls ? "amqps" : "amqp",
        hostname: target.address,
        port: target.port,
        username: credentials.username,
        password: Redacted.value(credentials.password),
        vhost: target.vhost,
        heartbeat: 30
      }, socketOptions)
      // Unhandled 'error' events would crash the process; losses are seen through 'close'.
      model.on("error", () => {})
      coalesceWrites(model)
      opened = model
      if (settled) socketOf(model)?.destroy()
      const channel = await model.createConfirmChannel()
      return { model, channel }
    })()
    attempt.then(
      ({ model, channel }) => {
        const state: Open = { model, channel, returned: new Map(), closedBy: undefined }
        channel.on("error", (error: unknown) => {
          state.closedBy = { code: serverCode(error) ?? 0, reason: brokerText(error) }
        })
        channel.on("return", (message: amqp.Message) => {
          const id = message.properties.messageId
          if (typeof id === "string") {
            // basic.return's fields (reply code and text) are not in amqplib's MessageFields type.
            const fields: object = message.fields
            const code = "replyCode" in fields ? String(fields.replyCode) : "312"
            const text = "replyText" in fields ? String(fields.replyText) : "NO_ROUTE"
            state.returned.set(id, `${code} ${text}`)
          }
        })
        if (!settle(Effect.succeed(state))) socketOf(model)?.destroy()
      },
      (error: unknown) => settle(Effect.fail(connectFailure(target, credentials.username, error)))
    )
    return Effect.sync(() => abandon(Effect.fail({ permanent: false, reason: "interrupted" })))
  })

/**
 * Closes the connection, waiting at most `withinMs` for the broker's close-ok: a broker that went
 * silent, or a socket already gone, never answers it, and a removal or shutdown must not wait on
 * that. Past the bound the socket is dropped.
 */
const closeQuietly = (state: Open, withinMs: number) =>
  Effect.async<void>((resume) => {
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(Effect.void)
    }
    const timer = setTimeout(() => {
      socketOf(state.model)?.destroy()
      finish()
    }, withinMs)
    state.model.close().catch(() => {}).finally(finish)
  })

/** A publisher for one RabbitMQ destination; its connection closes with the scope. */
export const make = Effect.fn("AmqpPublisher.make")(function*(
  config: RabbitmqConfig,
  credentials: RabbitmqCredentials,
  options: PublisherOptions = {}
): Effect.fn.Return<AmqpPublisher, never, BrokerEgress | Scope.Scope> {
  const egress = yield* BrokerEgress
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  let current: Open | undefined
  yield* Effect.addFinalizer(() => Effect.suspend(() => (current === undefined ? Effect.void : closeQuietly(current, timeoutMs))))

  // Connects once for all publishes waiting on it; a lost connection is dropped and the next publish reconnects.
  const reconnect: Effect.Effect<Open, PublishOutcome> = yield* connectOnce(Effect.gen(function*() {
    if (current !== undefined && current.closedBy === undefined) return current
    if (current !== undefined) yield* closeQuietly(current, timeoutMs)
    current = undefined
    const target = yield* egress.resolve("amqp", config.url).pipe(
      Effect.mapError((error) =>
        error._tag === "EgressRefused"
          ? PublishOutcome.Permanent({ reason: error.message.replace(/\.$/, "") })
          : PublishOutcome.Transient({ reason: error.message.replace(/\.$/, "") })
      )
    )
    const opened = yield* open(credentials, target, options).pipe(
      Effect.mapError(({ permanent, reason }) => permanent ? PublishOutcome.Permanent({ reason }) : PublishOutcome.Transient({ reason }))
    )
    opened.model.on("close", () => {
      opened.closedBy ??= { code: 0, reason: "the connection to the broker was lost" }
    })
    opened.channel.on("close", () => {
      opened.closedBy ??= { code: 0, reason: "the broker closed the channel" }
    })
    current = opened
    return opened
  }))


  const outcomeOf = (state: Open, messageId: string, error: unknown): PublishOutcome => {
    const returned = state.returned.get(messageId)
    state.returned.delete(messageId)
    if (returned !== undefined) {
      return PublishOutcome.Permanent({ reason: `RabbitMQ could not route the message from exchange ${config.exchange} with routing key "${config.routingKey}" to any queue (${returned})` })
    }
    if (error === null || error === undefined) return PublishOutcome.Delivered()
    if (state.closedBy?.code === 404) {
      return PublishOutcome.Permanent({ reason: `RabbitMQ refused the publish: ${state.closedBy.reason}` })
    }
    // A nack comes as its frame's fields; a lost channel as an Error.
    if (!(error instanceof Error)) return PublishOutcome.Transient({ reason: "RabbitMQ did not accept the message (basic.nack)" })
    return PublishOutcome.Transient({ reason: `the message was not confirmed: ${state.closedBy?.reason ?? describeError(error)}` })
  }

  // The confirm deadline is a plain timer in the callback's closure: cheaper per message than a racing fiber.
  const publishOn = (state: Open, message: BrokerMessage) =>
    Effect.async<PublishOutcome>((callback) => {
      let settled = false
      const resume = (outcome: Effect.Effect<PublishOutcome>) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        callback(outcome)
      }
      const timer = setTimeout(
        () => resume(Effect.succeed(asSentence(PublishOutcome.Transient({ reason: `RabbitMQ did not confirm the message within ${timeoutMs / 1000} s` })))),
        timeoutMs
      )
      const { "content-type": contentType, ...headers } = message.headers
      const timestamp = Number(headers["webhook-timestamp"])
      try {
        // A view of the body, not a copy: amqplib copies it into the frame.
        const body = Buffer.from(message.body.buffer, message.body.byteOffset, message.body.byteLength)
        state.channel.publish(config.exchange, config.routingKey, body, {
          persistent: true,
          mandatory: true,
          messageId: message.messageId,
          contentType: contentType ?? "application/json",
          headers,
          ...(Number.isFinite(timestamp) ? { timestamp } : {})
        }, (error: unknown) => resume(Effect.succeed(asSentence(outcomeOf(state, message.messageId, error)))))
      } catch (error) {
        // amqplib throws when the channel is already closed: the connection is gone.
        state.closedBy ??= { code: 0, reason: describeError(error) }
        resume(Effect.succeed(asSentence(PublishOutcome.Transient({ reason: `the connection to the broker was lost: ${describeError(error)}` }))))
      }
      return Effect.sync(() => {
        settled = true
        clearTimeout(timer)
      })
    })

  // No span per message: the delivery attempt that calls this has one, and a span here would cost
  // a noticeable share of a loopback publish (npm run bench:destinations).
  // On the open connection a publish is its one async step; otherwise it (re)connects first.
  const afterReconnect = publishVia(reconnect, publishOn)
  const publish = (message: BrokerMessage): Effect.Effect<PublishOutcome> =>
    current !== undefined && current.closedBy === undefined ? publishOn(current, message) : afterReconnect(message)

  return { publish }
})

/**
 * Checks a destination before it is stored: the broker is reachable, the
 * credentials work, and the exchange exists (a passive declare).
 */
export const check = Effect.fn("AmqpPublisher.check")(function*(
  config: RabbitmqConfig,
  credentials: RabbitmqCredentials,
  options: PublisherOptions = {}
): Effect.fn.Return<CheckOutcome, never, BrokerEgress> {
  const egress = yield* BrokerEgress
  const target = yield* Effect.either(egress.resolve("amqp", config.url))
  if (target._tag === "Left") return CheckOutcome.Refused({ reason: target.left.message })
  const opened = yield* Effect.either(open(credentials, target.right, options))
  if (opened._tag === "Left") return CheckOutcome.Refused({ reason: sentence(opened.left.reason) })
  const state = opened.right
  const verdict = yield* Effect.promise(() =>
    state.model.createChannel().then((channel) => {
      channel.on("error", () => {})
      return channel.checkExchange(config.exchange).then(
        () => CheckOutcome.Ok(),
        (error: unknown) =>
          CheckOutcome.Refused({
            reason: serverCode(error) === 404
              ? `The exchange ${config.exchange} does not exist on the RabbitMQ broker at ${target.right.host}:${target.right.port} (virtual host ${target.right.vhost}).`
              : `The RabbitMQ broker refused to check the exchange ${config.exchange}: ${brokerText(error)}.`
          })
      )
    }, (error: unknown) => CheckOutcome.Refused({ reason: `The RabbitMQ broker refused a channel: ${describeError(error)}.` }))
  )
  yield* closeQuietly(state, options.timeoutMs ?? DEFAULT_TIMEOUT_MS)
  return verdict
})
