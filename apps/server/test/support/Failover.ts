/**
 * What a failover test watches from outside a running server: a steady load
 * of call outcomes (every request's status and when it was sent and
 * answered), `/readyz` sampled, and each cluster node asked directly whether
 * it takes a write, so the seconds without writes are measured from the
 * client's side against the moment the new leader accepted writes.
 */
import { Eventually, type PgCluster } from "@crm-relay/testing"
import { Effect, Fiber, type Scope } from "effect"
import { adminHeaders } from "./TestServer.js"

/** One outcome posted: its call id, when it was sent and answered, with what. */
export interface Sent {
  readonly callId: string
  readonly sentAt: number
  answeredAt?: number
  /** 0 when no HTTP answer came (refused, reset, or none within 30 s). */
  status?: number
  body?: string
}

/** One sample of a watcher: when it was taken and what it found. */
export interface Sample<A> {
  readonly at: number
  readonly value: A
}

/** A POST with a JSON body and the admin token; never fails: a missing answer is status 0 with the reason. */
const post = (url: string, body: unknown): Effect.Effect<{ readonly status: number; readonly text: string }> =>
  Effect.promise(async () => {
    try {
      const response = await fetch(url, { method: "POST", headers: adminHeaders, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) })
      return { status: response.status, text: await response.text() }
    } catch (error) {
      return { status: 0, text: String(error) }
    }
  })

const get = (url: string): Effect.Effect<number> =>
  Effect.promise(async () => {
    try {
      const response = await fetch(url, { headers: adminHeaders, signal: AbortSignal.timeout(5_000) })
      await response.arrayBuffer()
      return response.status
    } catch {
      return 0
    }
  })

/** Posts one outcome of `callId` to the server at `admin`, recording it in `sent`. */
export const postOutcome = (admin: string, callId: string, body: unknown, sent: Array<Sent>) =>
  Effect.gen(function*() {
    const record: Sent = { callId, sentAt: Date.now() }
    sent.push(record)
    const answer = yield* post(`${admin}/v1/calls/${callId}/outcome`, body)
    record.answeredAt = Date.now()
    record.status = answer.status
    record.body = answer.text
    return record
  })

/**
 * Runs `each` every `everyMs` for the scope, each in a fiber of its own (a
 * slow answer never slows the rate); `stop` ends the ticks and waits for the
 * requests in flight.
 */
export const every = (everyMs: number, each: Effect.Effect<unknown>): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const inFlight = new Set<Fiber.RuntimeFiber<unknown>>()
    const ticker = yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      const fiber = yield* Effect.forkDaemon(each)
      inFlight.add(fiber)
      fiber.addObserver(() => inFlight.delete(fiber))
      yield* Eventually.pause(everyMs)
    })))
    return Effect.zipRight(Fiber.interrupt(ticker), Effect.suspend(() => Fiber.joinAll([...inFlight])).pipe(Effect.ignore))
  })

/** Samples `/readyz` of the server at `admin` every 250 ms into `samples` (its status, 0 for no answer). */
export const watchReadiness = (admin: string, samples: Array<Sample<number>>) =>
  every(250, Effect.flatMap(get(`${admin}/readyz`), (status) => Effect.sync(() => samples.push({ at: Date.now(), value: status }))))

/** Asks each node every 100 ms whether it takes a write; a sample is stamped when its probe started. */
export const watchWrites = (cluster: PgCluster.PgCluster, samples: Array<Sample<{ readonly name: string; readonly writable: boolean }>>) =>
  every(
    100,
    Effect.forEach(cluster.members, (member) =>
      Effect.gen(function*() {
        const at = Date.now()
        const writable = yield* cluster.writable(member.name)
        samples.push({ at, value: { name: member.name, writable } })
      }), { concurrency: "unbounded", discard: true })
  )

/** The median of `values` (NaN when empty). */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)]!
}

/** Seconds with two decimals. */
export const seconds = (millis: number): number => Math.round(millis / 10) / 100
