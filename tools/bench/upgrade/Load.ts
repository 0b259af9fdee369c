/**
 * A steady load of call outcomes at a fixed rate, sent round robin over the
 * replicas in the rotation (as a load balancer would: a replica leaves the
 * rotation before it is stopped). Every answer's status is counted under the
 * phase it was sent in. An outcome answered 502 or 429, or not answered at
 * all, is sent again (the same call id: the intake is idempotent by call) on
 * the next replica, as the call-handling service does, at most `RETRIES` times.
 */
import { Duration, Effect, Fiber } from "effect"
import { Agent, fetch } from "undici"

/**
 * The statuses the intake may answer: 202, and the Error object's statuses of the contract (400, 401, 404,
 * 429, 502), of the endpoint (409) and of every route (413, a body over the cap).
 */
export const CONTRACT_STATUSES: ReadonlySet<number> = new Set([202, 400, 401, 404, 409, 413, 429, 502])

/** Sent again after these; anything else is final. */
const RETRIED: ReadonlySet<number> = new Set([429, 502])
const RETRIES = 5

/** A replica the load can reach. */
export interface Target {
  readonly name: string
  readonly adminUrl: string
}

/** What the load saw. */
export interface Tally {
  /** Call ids answered 202. */
  readonly accepted: Set<string>
  /** Call ids given up on (no 202 after the retries). */
  readonly givenUp: Set<string>
  /** `phase → status → count`; status "no answer" for a request that got none. */
  readonly byPhase: Map<string, Map<number | "no answer", number>>
  /** A few examples of what was answered outside the contract, or why there was no answer. */
  readonly examples: Array<string>
  posted: number
}

/** The load for the scope: `rotation` (mutable: the run adds and removes replicas) and the current `phase`. */
export const start = (options: {
  readonly rotation: Array<Target>
  readonly phase: { current: string }
  readonly perSecond: number
  readonly adminToken: string
  /** The body of outcome i (call id `upgrade-i`). */
  readonly bodyOf: (i: number) => unknown
}) =>
  Effect.gen(function*() {
    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() => new Agent({ connections: 64, pipelining: 1, keepAliveTimeout: 10_000 })),
      (agent) => Effect.promise(() => agent.close())
    )
    const tally: Tally = { accepted: new Set(), givenUp: new Set(), byPhase: new Map(), examples: [], posted: 0 }
    let turn = 0
    /** Requests sent to each replica and not answered yet. */
    const pending = new Map<string, number>()
    /** Counts an answer under the phase its request was sent in. */
    const count = (sentIn: string, status: number | "no answer") => {
      const phase = tally.byPhase.get(sentIn) ?? new Map<number | "no answer", number>()
      phase.set(status, (phase.get(status) ?? 0) + 1)
      tally.byPhase.set(sentIn, phase)
    }
    const note = (line: string) => {
      if (tally.examples.length < 10) tally.examples.push(line)
    }
    const once = (callId: string, body: string) =>
      Effect.promise(async () => {
        const target = options.rotation[turn++ % options.rotation.length]!
        const sentIn = options.phase.current
        pending.set(target.name, (pending.get(target.name) ?? 0) + 1)
        try {
          const response = await fetch(`${target.adminUrl}/v1/calls/${callId}/outcome`, {
            method: "POST",
            headers: { authorization: `Bearer ${options.adminToken}`, "content-type": "application/json" },
            body,
            dispatcher
          })
          const text = await response.text()
          count(sentIn, response.status)
          if (!CONTRACT_STATUSES.has(response.status)) note(`${target.name}: ${response.status} ${text.slice(0, 300)}`)
          return response.status
        } catch (error) {
          count(sentIn, "no answer")
          note(`${target.name}: no answer (${String((error as { cause?: unknown }).cause ?? error)})`)
          return "no answer" as const
        } finally {
          pending.set(target.name, pending.get(target.name)! - 1)
        }
      })
    const post = (i: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const callId = `upgrade-${i}`
        const body = JSON.stringify(options.bodyOf(i))
        for (let attempt = 0; attempt <= RETRIES; attempt++) {
          const status = yield* once(callId, body)
          if (status === 202) return void tally.accepted.add(callId)
          if (status !== "no answer" && !RETRIED.has(status)) break
          yield* Effect.sleep("200 millis")
        }
        tally.givenUp.add(callId)
      })
    const stopped = { now: false }
    const inFlight = new Set<Fiber.RuntimeFiber<void>>()
    const pacer = yield* Effect.fork(Effect.gen(function*() {
      const began = performance.now()
      for (let i = 0; !stopped.now; i++) {
        const wait = began + (i * 1000) / options.perSecond - performance.now()
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        if (stopped.now) break
        tally.posted++
        // A daemon: it outlives the pacer, which ends when the load stops, and is awaited by `stop`.
        const fiber = yield* Effect.forkDaemon(post(i))
        inFlight.add(fiber)
        fiber.addObserver(() => inFlight.delete(fiber))
      }
    }))
    return {
      tally,
      /** Waits until every request sent to `name` has its answer (at most `limit`), as a draining balancer does. */
      drained: (name: string, limit: Duration.DurationInput) =>
        Effect.gen(function*() {
          const deadline = performance.now() + Duration.toMillis(limit)
          while ((pending.get(name) ?? 0) > 0 && performance.now() < deadline) yield* Effect.sleep("20 millis")
        }),
      /** Stops posting and waits for the answers of what was sent. */
      stop: Effect.gen(function*() {
        stopped.now = true
        yield* Fiber.join(pacer)
        yield* Fiber.joinAll([...inFlight])
      })
    }
  })
