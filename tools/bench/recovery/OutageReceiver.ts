/**
 * The receiver of the recovery bench: HTTPS on 127.0.0.1 (the run's
 * certificate) that answers 503 while its outage lasts and 204 otherwise,
 * the outage read on the server's (jumpable) clock. It counts the requests
 * it answered while down, all requests, each webhook-id's first 2xx (when it
 * arrived) and the requests whose webhook-id had already arrived.
 */
import type { Certificate } from "@crm-relay/testing"
import { Effect } from "effect"
import { listen, readBody } from "../support/HttpsListener.js"

/** What the receiver saw (times on the jumpable clock, epoch milliseconds). */
export interface Seen {
  /** When each webhook-id first arrived (answered 204). */
  readonly arrivedAt: Map<string, number>
  /** Requests answered 503. */
  whileDown: number
  total: number
  /** Requests answered 204 whose webhook-id had already arrived. */
  duplicates: number
  /** When the last request came (performance.now(), real time): the bench jumps only while it is quiet. */
  lastRequestReal: number
}

/** Down over [`from`, `until`) of the clock; up before and after. */
export interface Outage {
  from: number
  until: number
}

/** The receiver for the scope, down while `outage` says, on `now`'s clock. */
export const start = (tls: Certificate.TlsMaterial, now: () => number) =>
  Effect.gen(function*() {
    const outage: Outage = { from: Number.POSITIVE_INFINITY, until: Number.POSITIVE_INFINITY }
    const seen: Seen = { arrivedAt: new Map(), whileDown: 0, total: 0, duplicates: 0, lastRequestReal: 0 }
    const listener = yield* listen(tls, (request, response) =>
      readBody(request, () => {
        const at = now()
        seen.total++
        seen.lastRequestReal = performance.now()
        if (at >= outage.from && at < outage.until) {
          seen.whileDown++
          response.writeHead(503)
          response.end()
          return
        }
        const id = String(request.headers["webhook-id"] ?? "")
        if (seen.arrivedAt.has(id)) seen.duplicates++
        else seen.arrivedAt.set(id, at)
        response.writeHead(204)
        response.end()
      }))
    return { seen, outage, url: `https://127.0.0.1:${listener.port}/hooks/recovery` }
  })
