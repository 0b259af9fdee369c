/**
 * The failed-key limit's refusals answered before any router: a request from
 * a client address the limit refuses (FailedKeys' cached verdict) gets its
 * 429 with `Retry-After` and the Error object straight from the Node
 * request event — no fiber, no routing, no query — unless its key is valid:
 * a tagged key whose tag matches (KeyTags) and that is not known revoked, or
 * a key of the old form this replica saw valid, goes on to be served, so
 * accounts sharing an address with a failing one are not refused.
 *
 * A refusal costs little, but a flood answered as fast as it is sent never
 * lets the process sleep: the answer is held (`holdMs`, a tarpit), and the
 * connection reads nothing until it is written. A client that waits for each
 * answer (HTTP/1.1 without pipelining, as every common client) then sends at
 * most one request per hold on each connection, so a refused address costs
 * the process at most its connections ÷ hold requests a second, however fast
 * it could send.
 *
 * Counted in the HTTP and failed-key metrics; logged at most once per
 * address per minute (the access log's throttle).
 */
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { EventApiLive, FailedKeys, IntegrationKeys } from "@crm-relay/events"
import { Effect, Redacted, Runtime } from "effect"
import type * as Http from "node:http"
import { performance } from "node:perf_hooks"
import type { Duplex } from "node:stream"
import { observe } from "../accessLog.js"
import type { Shortcut } from "../HttpConnections.js"
import type { RefusalLog } from "../RefusalLog.js"
import * as ClientAddress from "./ClientAddress.js"

/** The route label of requests refused before routing. */
export const ROUTE = "refused"

/** The refusals of the public port. */
export interface Options {
  readonly trusted: ReadonlyArray<AddressPolicy.Cidr>
  /** How long a refusal's answer is held, its connection unread meanwhile (0: answered at once). */
  readonly holdMs: number
}

/**
 * Holds answers of refused requests: each connection with an answer held is
 * paused (Node stops reading its socket, so nothing more of it is parsed)
 * until its last held answer is written.
 */
const tarpit = (holdMs: number) => {
  // The timers of each connection's held answers (one close listener per connection, however many holds).
  const held = new WeakMap<Duplex, Set<NodeJS.Timeout>>()
  const timersOf = (socket: Duplex): Set<NodeJS.Timeout> => {
    let timers = held.get(socket)
    if (timers === undefined) {
      const mine = timers = new Set()
      held.set(socket, mine)
      // A connection gone meanwhile needs no answer.
      socket.once("close", () => mine.forEach(clearTimeout))
    }
    return timers
  }
  // When each connection's latest held answer goes out: a request read while one is still held (the
  // pause below can lose a race with Node's own resume) is answered a whole hold after it, so the
  // bound of one answer per connection per hold never rests on the pause alone.
  const lastDue = new WeakMap<Duplex, number>()
  return (request: Http.IncomingMessage, answer: () => void): void => {
    if (holdMs === 0) return answer()
    const socket = request.socket
    const timers = timersOf(socket)
    const now = performance.now()
    const due = Math.max(now, lastDue.get(socket) ?? 0) + holdMs
    lastDue.set(socket, due)
    const timer = setTimeout(() => {
      timers.delete(timer)
      answer()
      if (timers.size === 0 && !socket.destroyed) socket.resume()
    }, due - now)
    timers.add(timer)
    // Node resumes reading when a request's message completes, after this event: the connection rests
    // once the request has ended (a body is read and dropped first).
    request.once("end", () => {
      if (timers.size > 0) socket.pause()
    })
    request.resume()
  }
}

/** The shortcut of the public port, over this replica's `FailedKeys`. */
export const shortcut = (options: Options) => (refusals: RefusalLog) =>
  Effect.gen(function*() {
    const failedKeys = yield* FailedKeys.FailedKeys
    const tagger = yield* (yield* IntegrationKeys.IntegrationKeys).tagger
    // A key that may be valid: the router's key check decides, as for any address.
    const mayBeValid = (authorization: string | undefined) => {
      const key = Redacted.value(EventApiLive.bearerToken(authorization))
      const shape = tagger.shape(key)
      return shape === "tagged" ? !failedKeys.revoked.has(key) : shape === "legacy" && failedKeys.validLegacy.has(key)
    }
    const runtime = yield* Effect.runtime<never>()
    const message = EventApiLive.messages.failedKeys(failedKeys.policy.limit)
    const hold = tarpit(options.holdMs)
    return ((request, response) => {
      const started = performance.now()
      const header = request.headers["x-forwarded-for"]
      const forwarded = Array.isArray(header) ? header.join(", ") : header
      const address = ClientAddress.resolve(options.trusted, request.socket.remoteAddress, forwarded)
      if (address === undefined) return false
      const now = Date.now()
      if (failedKeys.refusedAt(address, now) === undefined || mayBeValid(request.headers.authorization)) return false
      FailedKeys.refusals.unsafeUpdate(1, [])
      const method = request.method ?? "GET"
      const leftOut = refusals(address, now)
      hold(request, () => {
        if (response.destroyed) return
        // Seconds left of the window when the answer goes out (it may have ended during the hold).
        const retryAfterSeconds = failedKeys.refusedAt(address, Date.now()) ?? 1
        const body = JSON.stringify({ error: message, retryAfterSeconds })
        response.writeHead(429, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "retry-after": String(retryAfterSeconds)
        })
        response.end(body)
        const seconds = (performance.now() - started) / 1000
        observe("public", method, ROUTE, 429, seconds)
        if (leftOut === undefined) return
        Runtime.runFork(runtime)(Effect.logInfo("http request").pipe(Effect.annotateLogs({
          log: "access",
          api: "public",
          method,
          route: ROUTE,
          status: 429,
          duration_ms: Math.round(seconds * 100_000) / 100,
          client_address: address,
          refusals_left_out: leftOut
        })))
      })
      return true
    }) satisfies Shortcut
  })
