/**
 * The connection rules of the listeners that face the internet (the public
 * port, the Integrations area), below HTTP: how long a connection may take to
 * send a request head, a whole request, or stay idle between requests, and
 * how many connections it may hold at once. Excess connections are closed as
 * soon as they are accepted (before any allocation for HTTP), counted, and
 * logged at most once per address per minute; timed-out requests are counted
 * too (HttpConnections answers them with the Error object).
 */
import { Effect, Metric, Runtime } from "effect"
import * as Http from "node:http"
import type { Socket } from "node:net"
import * as RefusalLog from "./RefusalLog.js"

/** The rules of one server. */
export interface ConnectionLimits {
  /** A connection (or a keep-alive request) must deliver its complete head within this. */
  readonly headTimeoutMs: number
  /** Head and body of one request must arrive within this (at least `headTimeoutMs`). */
  readonly requestTimeoutMs: number
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number
  /** Connections held at once; more are closed at once. */
  readonly maxConnections: number
}

/** A listener these rules guard: its counters, and how its log lines name it and its budget. */
export interface Listener {
  /** Connections closed at once because the listener held its budget. */
  readonly refused: Metric.Metric.Counter<number>
  /** Connections closed because a request head, or a whole request, did not arrive in time. */
  readonly timedOut: Readonly<Record<"head" | "request", Metric.Metric.Counter<number>>>
  /** "public port refused a connection: it holds PUBLIC_MAX_CONNECTIONS" */
  readonly refusedLine: string
}

const listener = (name: string, what: string, budget: string): Listener => {
  const timeouts = Metric.counter(`crm_relay_${name}_timeouts_total`, {
    description: `${what} connections closed because a request head (phase=head) or a whole request (phase=request) did not arrive in time.`,
    incremental: true
  })
  return {
    refused: Metric.counter(`crm_relay_${name}_connections_refused_total`, {
      description: `Connections to the ${what} closed at once because it already held ${budget}.`,
      incremental: true
    }),
    timedOut: { head: Metric.tagged(timeouts, "phase", "head"), request: Metric.tagged(timeouts, "phase", "request") },
    refusedLine: `${what} refused a connection: it holds ${budget}`
  }
}

/** The public port (the Event API). */
export const publicPort = listener("public", "public port", "PUBLIC_MAX_CONNECTIONS")

/** The Integrations area's listener. */
export const portal = listener("portal", "Integrations area", "PORTAL_MAX_CONNECTIONS")

/** Node's server options for `limits` (Node checks its head and request deadlines every `connectionsCheckingInterval`). */
export const serverOptions = (limits: ConnectionLimits): Http.ServerOptions => ({
  headersTimeout: limits.headTimeoutMs,
  requestTimeout: limits.requestTimeoutMs,
  keepAliveTimeout: limits.keepAliveTimeoutMs,
  // Node's check runs on this period: a tenth of the head deadline keeps the overshoot small.
  connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headTimeoutMs / 10)))
})

/**
 * Installs the budget and the silent-connection deadline on `server`. Node's
 * own head deadline starts at a request's first byte: a connection that never
 * sends one would stay open for ever, so it gets its own timer.
 */
export const install = (server: Http.Server, limits: ConnectionLimits, guarded: Listener, runtime: Runtime.Runtime<never>): void => {
  const run = <A>(effect: Effect.Effect<A>) => void Runtime.runFork(runtime)(effect)
  const refusalLog = RefusalLog.make()
  server.maxConnections = limits.maxConnections
  server.on("drop", (data?: { readonly remoteAddress?: string }) => {
    const address = data?.remoteAddress ?? "unknown"
    const leftOut = refusalLog(address, Date.now())
    run(Effect.zipRight(
      Metric.increment(guarded.refused),
      leftOut === undefined ? Effect.void : Effect.logWarning(guarded.refusedLine).pipe(
        Effect.annotateLogs({ log: "access", client_address: address, max_connections: limits.maxConnections, left_out_since_last_line: leftOut })
      )
    ))
  })
  server.on("connection", (socket: Socket) => {
    const silent = setTimeout(() => {
      if (socket.destroyed || socket.bytesRead > 0) return
      run(Metric.increment(guarded.timedOut.head))
      socket.destroy()
    }, limits.headTimeoutMs)
    silent.unref()
    socket.once("close", () => clearTimeout(silent))
  })
}
