/**
 * Call outcomes as the call-handling service posts them to a running
 * server's internal API (`POST /v1/calls/{id}/outcome`), and the wait until
 * the account has no delivery left to make.
 */
import { Duration, Effect } from "effect"
import type { JsonRequest } from "./Http.js"
import { leadOutcome } from "./Receiver.js"

/** How `postOutcomes` paces its requests. */
export interface Pace {
  /** Requests in flight at most. */
  readonly concurrency: number
  /** Outcome i is not posted before i / `perSecond` seconds (0 or absent: as fast as `concurrency` allows). */
  readonly perSecond?: number | undefined
  /** Receives each request's own latency in milliseconds (send → 202). */
  readonly requestMillis?: Array<number> | undefined
}

/** Posts `count` lead outcomes of `accountId` (call ids `${prefix}-i`) as `pace` says; returns each call's 202 time (performance.now()). */
export const postOutcomes = (
  call: JsonRequest,
  adminUrl: string,
  adminToken: string,
  accountId: string,
  prefix: string,
  count: number,
  pace: Pace
) =>
  Effect.gen(function*() {
    const accepted = new Map<string, number>()
    const body = leadOutcome(accountId)
    const perSecond = pace.perSecond ?? 0
    const start = performance.now()
    yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      (i) =>
        Effect.gen(function*() {
          if (perSecond > 0) {
            const wait = start + (i * 1000) / perSecond - performance.now()
            if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
          }
          const callId = `${prefix}-${i}`
          const sent = performance.now()
          yield* call("POST", `${adminUrl}/v1/calls/${callId}/outcome`, adminToken, body)
          const at = performance.now()
          accepted.set(callId, at)
          pace.requestMillis?.push(at - sent)
        }),
      { concurrency: pace.concurrency, discard: true }
    )
    return accepted
  })

/**
 * Waits until the account has no pending delivery (internal API), or `limit` passes; answers whether it has
 * none. A receiver sees a delivery before the worker records it delivered: this waits for the record.
 */
export const awaitNoPending = (call: JsonRequest, adminUrl: string, adminToken: string, accountId: string, limit: Duration.DurationInput) =>
  Effect.gen(function*() {
    const deadline = performance.now() + Duration.toMillis(limit)
    const pending = Effect.map(
      call("GET", `${adminUrl}/v1/deliveries?status=pending&account=${encodeURIComponent(accountId)}&limit=1`, adminToken),
      (page) => (Array.isArray(page["deliveries"]) ? page["deliveries"].length : 0)
    )
    while ((yield* pending) > 0) {
      if (performance.now() > deadline) return false
      yield* Effect.sleep("20 millis")
    }
    return true
  })
