/**
 * The failed-key limit's refusals answered before any router: a request from
 * a client address the limit refuses (FailedKeys' cached verdict) gets its
 * 429 with `Retry-After` and the Error object straight from the Node
 * request event — no fiber, no routing, no query — so a flood from refused
 * addresses costs the process about what Node's HTTP parser costs.
 * Counted in the HTTP and failed-key metrics; logged at most once per
 * address per minute (the access log's throttle).
 */
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { EventApiLive, FailedKeys } from "@crm-relay/events"
import { Effect, Runtime } from "effect"
import { performance } from "node:perf_hooks"
import { observe } from "../accessLog.js"
import type { Shortcut } from "../HttpConnections.js"
import type { RefusalLog } from "../RefusalLog.js"
import * as ClientAddress from "./ClientAddress.js"

/** The route label of requests refused before routing. */
export const ROUTE = "refused"

/** The shortcut of the public port, over this replica's `FailedKeys`. */
export const shortcut = (trusted: ReadonlyArray<AddressPolicy.Cidr>) => (refusals: RefusalLog) =>
  Effect.gen(function*() {
    const failedKeys = yield* FailedKeys.FailedKeys
    const runtime = yield* Effect.runtime<never>()
    const message = EventApiLive.messages.failedKeys(failedKeys.policy.limit)
    return ((request, response) => {
      const started = performance.now()
      const header = request.headers["x-forwarded-for"]
      const forwarded = Array.isArray(header) ? header.join(", ") : header
      const address = ClientAddress.resolve(trusted, request.socket.remoteAddress, forwarded)
      if (address === undefined) return false
      const now = Date.now()
      const retryAfterSeconds = failedKeys.refusedAt(address, now)
      if (retryAfterSeconds === undefined) return false
      const body = JSON.stringify({ error: message, retryAfterSeconds })
      response.writeHead(429, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "retry-after": String(retryAfterSeconds)
      })
      response.end(body)
      FailedKeys.refusals.unsafeUpdate(1, [])
      const seconds = (performance.now() - started) / 1000
      const method = request.method ?? "GET"
      observe("public", method, ROUTE, 429, seconds)
      const leftOut = refusals(address, now)
      if (leftOut !== undefined) {
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
      }
      return true
    }) satisfies Shortcut
  })
