/**
 * The runner: drains a queue table with a handler, holding slots and each
 * key's share, leases kept alive by a heartbeat, woken by notifications, due
 * times and jobs' ends, and stopped cleanly by interruption (see index.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import {
  Cause,
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  type Exit,
  Fiber,
  FiberRef,
  FiberRefs,
  HashMap,
  Option,
  Predicate,
  Queue,
  Runtime,
  Stream,
  Tracer
} from "effect"
import { DatabaseInfo } from "../Database.js"
import { JobHandoffs, type Reservation } from "../JobHandoffs.js"
import { isTransient } from "../internal/pgFailures.js"
import { Notifier } from "../Notifier.js"
import { wake } from "./Controls.js"
import { observer, spanOptionsOf } from "./internal/attempts.js"
import { ClaimWindow } from "./internal/claimWindow.js"
import { jobOf } from "./internal/jobOf.js"
import { makeResults } from "./internal/results.js"
import { type ClaimShares, make, releaseOtherProcesses } from "./Statements.js"
import { type Job, JobResult, type JobTable } from "./Table.js"

/** How a runner works. */
export interface RunOptions {
  /** Jobs running at once in this runner. Default 10. */
  readonly concurrency?: number
  /** Most rows one claim takes. Default: `concurrency`. */
  readonly batchSize?: number
  /** Lease per claim, extended by the heartbeat. Default 30 s. */
  readonly lease?: Duration.DurationInput
  /** Heartbeat period. Default: a third of the lease. */
  readonly heartbeat?: Duration.DurationInput
  /** Safety poll when no wake-up arrives. Default 1 s on PGlite, 30 s on PostgreSQL. */
  readonly pollInterval?: Duration.DurationInput
  /** At shutdown, how long running jobs may take to finish before they are interrupted and released. Default 5 s. */
  readonly shutdownGrace?: Duration.DurationInput
  /** Lease owner id. Default: host, pid and a random part. */
  readonly owner?: string
  /**
   * On a fair table (see `Fairness`): most jobs of one key (receiver
   * origin, bridge) running at once in this runner. Default: a quarter of
   * `concurrency` (at least 1).
   */
  readonly maxPerKey?: number
  /**
   * On embedded PGlite (the database is this process's alone), release other
   * processes' leases at start (`releaseOtherProcesses`): after a crash and
   * restart the jobs run at once instead of after their leases expire.
   * Default true; ignored on PostgreSQL, where other replicas hold live leases.
   */
  readonly reclaimOnPglite?: boolean
}

/** The default share of a runner's slots one key may hold: a quarter. */
export const defaultMaxPerKey = (concurrency: number): number => Math.max(1, Math.floor(concurrency / 4))

/**
 * The longest a job's end waits to be claimed for (see `run`): ends within it share one claim, unless
 * enough slots were freed to claim at once.
 */
export const CLAIM_WINDOW: Duration.Duration = Duration.millis(10)

/** The longest a runner waits for its LISTEN before its first claim (see `run`). */
export const LISTEN_WAIT: Duration.Duration = Duration.seconds(5)

/** Sleeps `duration` of real time, whatever the Clock service is. */
const realSleep = (duration: Duration.Duration): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), Duration.toMillis(duration))
    return Effect.sync(() => clearTimeout(timer))
  })

/** Delay before a job whose handler died unexpectedly runs again: 30 s doubling, at most an hour. */
export const defectDelay = (attempt: number): Duration.Duration =>
  Duration.millis(Math.min(30_000 * 2 ** Math.max(0, Math.min(attempt - 1, 20)), 3_600_000))

/** Delay before a job whose database connection was dropped under it (see `isTransient`) runs again. */
export const TRANSIENT_DELAY: Duration.Duration = Duration.seconds(1)

/** True when `cause` failed or died of a `SqlError` from a dropped connection (a failover, a standby). */
const lostDatabase = (cause: Cause.Cause<unknown>): boolean =>
  [...Cause.failures(cause), ...Cause.defects(cause)].some((error) =>
    Predicate.isTagged(error, "SqlError") && isTransient(error as SqlError)
  )

/**
 * Runs `handler` on the due jobs of `jobs` until interrupted (see the module
 * comment). The handler decides the job's fate with a `JobResult`; if it
 * dies, the job is retried after `defectDelay`. Interrupting the returned
 * effect is the clean shutdown.
 */
export const run = <A, R>(
  jobs: JobTable<A>,
  handler: (job: Job<A>) => Effect.Effect<JobResult, never, R>,
  options: RunOptions = {}
): Effect.Effect<never, never, R | SqlClient.SqlClient | Notifier> =>
  Effect.gen(function*() {
    const notifier = yield* Notifier
    const info = yield* Effect.serviceOption(DatabaseInfo)
    const queue = yield* make(jobs, options.owner)
    const concurrency = Math.max(1, options.concurrency ?? 10)
    const batchSize = Math.max(1, Math.min(options.batchSize ?? concurrency, concurrency))
    const lease = Duration.decode(options.lease ?? Duration.seconds(30))
    const heartbeatEvery = Duration.decode(options.heartbeat ?? Duration.millis(Duration.toMillis(lease) / 3))
    const isPglite = Option.match(info, { onNone: () => false, onSome: (i) => i.kind === "pglite" })
    const poll = Duration.decode(options.pollInterval ?? (isPglite ? Duration.seconds(1) : Duration.seconds(30)))
    const grace = Duration.decode(options.shutdownGrace ?? Duration.seconds(5))

    if (isPglite && (options.reclaimOnPglite ?? true)) {
      const released = yield* releaseOtherProcesses(jobs)
      if (released > 0) yield* Effect.logInfo("Took back the jobs of a previous run").pipe(Effect.annotateLogs({ released }))
    }
    const wakeUp = yield* Queue.sliding<void>(1)
    // Signals the heartbeat that jobs run (it sleeps without a timer while none do).
    const started = yield* Queue.sliding<void>(1)
    // The fibers of the running jobs by job id; each job removes itself as it ends.
    const running = new Map<string, Fiber.RuntimeFiber<void>>()
    const finishing = new Set<string>()
    // Running jobs per fairness key (fair tables).
    const perKey = new Map<string, number>()
    const maxPerKey = Math.max(1, options.maxPerKey ?? defaultMaxPerKey(concurrency))
    const shares: ClaimShares | undefined = jobs.fairness === undefined ? undefined : { maxPerKey, running: perKey }
    const busyKeys = () => Array.from(perKey).filter(([, n]) => n >= maxPerKey).map(([key]) => key)
    let stopping = false
    // Slots set aside for jobs a producer of this process is inserting leased to this runner (JobHandoffs).
    let reserved = 0

    // Jobs' ends wake the claimer, gathered (see ClaimWindow).
    const ends = new ClaimWindow(Math.max(1, Math.floor(maxPerKey / 4)), Duration.toMillis(CLAIM_WINDOW), () => wakeUp.unsafeOffer(void 0))

    const { finish, storeWaiting } = yield* makeResults(queue)

    const clock = yield* Effect.clock
    const observe = observer(jobs.table, clock)
    const spanOptions = spanOptionsOf(jobs)

    // A job gives back its slot (and its key's share) once its handler decided, before its result is
    // stored: the target is no longer busy with it, and the next claim need not wait for the store.
    const giveBack = (job: Job<A>) => {
      if (job.key !== undefined) {
        const left = (perKey.get(job.key) ?? 1) - 1
        if (left <= 0) perKey.delete(job.key)
        else perKey.set(job.key, left)
      }
      ends.slotFreed()
    }

    // The slot was given back before the result was stored, so a claim (and its next-due reading) may
    // have seen the row still leased and chosen to sleep until the lease ends: a retry stored since is
    // due sooner, so the claimer reads the next due time again.
    const afterStored = (result: JobResult, started: bigint) =>
      Effect.sync(() => {
        if (result._tag === "Retry") wakeUp.unsafeOffer(void 0)
        observe(result, started)
      })

    // A job's fiber starts with its log annotations and its span as the parent span already in place
    // (`Effect.annotateLogs` and `Effect.withSpan` would each set a fiber ref and set it back around
    // the job: under a backlog, a good part of the runner's own work per job).
    const runtime = yield* Effect.runtime<R>()
    const annotations = runtime.fiberRefs.pipe(FiberRefs.getOrDefault(FiberRef.currentLogAnnotations))
    const timingEnabled = runtime.fiberRefs.pipe(FiberRefs.getOrDefault(FiberRef.currentTracerTimingEnabled))
    const spanName = `JobQueue.run ${jobs.table}`

    const runJob = (job: Job<A>) => {
      const started = clock.unsafeCurrentTimeNanos()
      return Effect.suspend(() => handler(job)).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : lostDatabase(cause)
            // A dropped connection (a failover, a standby): the work is retried soon, on another connection.
            ? Effect.as(
              Effect.logWarning("Job lost its database connection; retrying", cause).pipe(Effect.annotateLogs({ job_id: job.id })),
              JobResult.Retry({ delay: TRANSIENT_DELAY, error: "The database connection was lost; retrying." })
            )
            : Effect.as(
              Effect.logError("Job handler failed unexpectedly", cause).pipe(Effect.annotateLogs({ job_id: job.id })),
              JobResult.Retry({ delay: defectDelay(job.attempt), error: "The job failed unexpectedly." })
            )
        ),
        // From here the heartbeat leaves the job alone: its row is being (or has been) finished.
        Effect.flatMap((result) => {
          finishing.add(job.id)
          giveBack(job)
          return Effect.zipRight(finish(job, result), afterStored(result, started))
        })
      )
    }

    // A job's end, whatever it was (its fiber's observer: no uninterruptible region, no Effect steps, per job):
    // called as the fiber exits, before anyone awaiting it (the heartbeat, the shutdown) resumes.
    const ended = (job: Job<A>, span: Tracer.Span) => (exit: Exit.Exit<void>) => {
      if (span.status._tag !== "Ended") span.end(timingEnabled ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
      running.delete(job.id)
      // Stopped before its handler decided (interrupted): its slot is given back now.
      if (!finishing.delete(job.id)) giveBack(job)
    }

    // A daemon (the runner's finalizer, not the claiming fiber, decides when it stops), started on the
    // next tick, after the claimer recorded it among the running jobs.
    const startJob = (job: Job<A>, span: Tracer.Span): Fiber.RuntimeFiber<void> => {
      const fiber = Runtime.runFork(Runtime.make({ ...runtime, context: Context.add(runtime.context, Tracer.ParentSpan, span) }), runJob(job), {
        immediate: false,
        updateRefs: (refs, fiberId) =>
          FiberRefs.updateAs(refs, {
            fiberId,
            fiberRef: FiberRef.currentLogAnnotations,
            value: HashMap.set(HashMap.set(annotations, "job_id", job.id), "attempt", job.attempt)
          })
      })
      fiber.addObserver(ended(job, span))
      return fiber
    }

    const beat = Effect.gen(function*() {
      const ids = Array.from(running.keys()).filter((id) => !finishing.has(id))
      if (ids.length === 0) return
      const held = new Set(yield* queue.heartbeat(ids, lease))
      for (const id of ids) {
        const fiber = running.get(id)
        // Finished meanwhile (its row no longer pending): not a lost lease.
        if (held.has(id) || finishing.has(id) || fiber === undefined) continue
        yield* Effect.logWarning("Lost the lease of a running job; stopping it").pipe(Effect.annotateLogs({ job_id: id }))
        running.delete(id)
        yield* Fiber.interrupt(fiber)
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("Lease heartbeat failed", cause)))

    // Open once the first LISTEN is in effect (or failed: then the runner polls meanwhile). The first claim
    // waits for it: a job queued between a claim made earlier and the LISTEN would sleep until the poll.
    const listening = yield* Deferred.make<void>()
    const listen = Stream.unwrapScoped(Effect.tap(notifier.subscribe(jobs.channel), () =>
      Effect.zipRight(Deferred.succeed(listening, undefined), Effect.logDebug("Job notifications listening")))).pipe(
      Stream.runForEach(() => wakeUp.offer(void 0)),
      Effect.catchAllCause((cause) =>
        Effect.zipRight(Deferred.succeed(listening, undefined), Effect.logWarning("Job notifications interrupted; polling meanwhile", cause))
      ),
      Effect.zipRight(Effect.sleep(Duration.seconds(1))),
      Effect.forever
    )

    // Sleeps until the earliest of: a wake-up, the next due time, the poll interval. A wake-up that
    // came while the last claim ran, or comes while the next due time is being read, claims at once:
    // the reading finishes in the background (uninterruptible, so no query is cancelled) and is dropped.
    const idle = (untilDue: boolean) =>
      Effect.gen(function*() {
        if (Option.isSome(yield* Queue.poll(wakeUp))) return
        const busy = busyKeys()
        // The next due time leaves out the keys at their share: one of their jobs' ends must wake the claimer.
        if (untilDue && busy.length > 0) ends.roomBound = true
        const untilNext = untilDue
          ? Effect.flatMap(Effect.uninterruptible(queue.nextDue(busy)), (due) =>
            Option.isNone(due)
              ? Effect.sleep(poll)
              : Effect.flatMap(Clock.currentTimeMillis, (now) =>
                Effect.sleep(Duration.min(poll, Duration.millis(Math.max(0, due.value.getTime() - now))))))
          : Effect.sleep(poll)
        yield* Effect.raceFirst(wakeUp.take, Effect.disconnect(untilNext))
      })

    let failures = 0
    const backoff = Effect.suspend(() => Effect.sleep(Duration.millis(Math.min(250 * 2 ** Math.min(failures++, 7), 30_000))))

    const step = Effect.gen(function*() {
      // Jobs whose results are being stored hold no slot.
      const free = concurrency - (running.size - finishing.size) - reserved
      if (free <= 0) {
        ends.roomBound = true
        return yield* idle(false)
      }
      const want = Math.min(free, batchSize)
      ends.claimBegins()
      // The claim leaves the due rows of keys at their share now: their jobs' ends (even during the claim) wake it.
      ends.roomBound = busyKeys().length > 0
      const heldAtClaim = shares === undefined ? undefined : new Map(perKey)
      const claimed = yield* queue.claim(want, lease, shares)
      failures = 0
      // A key the claim filled to the room it had may have due rows left: its jobs' ends wake the claimer.
      if (heldAtClaim !== undefined && !ends.roomBound) {
        const taken = new Map<string, number>()
        for (const job of claimed) if (job.key !== undefined) taken.set(job.key, (taken.get(job.key) ?? 0) + 1)
        for (const [key, n] of taken) if (n >= maxPerKey - (heldAtClaim.get(key) ?? 0)) ends.roomBound = true
      }
      for (const job of claimed) {
        if (job.key !== undefined) perKey.set(job.key, (perKey.get(job.key) ?? 0) + 1)
        // One span per attempt, in the trace that queued the job when the table stores it.
        running.set(job.id, startJob(job, yield* Effect.makeSpan(spanName, spanOptions(job))))
      }
      if (claimed.length > 0) yield* started.offer(void 0)
      // A full batch suggests more are due: claim again at once. After a partial batch the next
      // wake-up (a notification, a job ending) claims again; only an empty claim looks for the next
      // due time (one query fewer per wake-up under load), or a partial one whose jobs' ends will not wake it.
      if (claimed.length < want) yield* idle(claimed.length === 0 || !ends.roomBound)
    }).pipe(
      // The database may be unreachable for a while: keep trying, never let the runner die.
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.zipRight(Effect.logWarning("Job runner step failed; retrying", cause), backoff)
      )
    )

    // Jobs handed over by a producer of this process (JobHandoffs): inserted leased to this runner, so they
    // run without a notification or a claim. Their room (slots, each key's share) is taken at once, and moves
    // to the jobs as they start; what was not inserted is given back as a job's end gives its slot back.
    const reserve = (keys: ReadonlyArray<string>): Option.Option<Reservation> => {
      const free = concurrency - (running.size - finishing.size) - reserved
      if (stopping || keys.length > free) return Option.none()
      const held = new Map<string, number>()
      for (const key of keys) held.set(shares === undefined ? "" : key, (held.get(shares === undefined ? "" : key) ?? 0) + 1)
      if (shares !== undefined) {
        for (const [key, n] of held) if ((perKey.get(key) ?? 0) + n > maxPerKey) return Option.none()
        for (const [key, n] of held) perKey.set(key, (perKey.get(key) ?? 0) + n)
      }
      reserved += keys.length
      const unhold = (key: string) => {
        const left = held.get(key)! - 1
        if (left === 0) held.delete(key)
        else held.set(key, left)
        reserved--
        if (shares === undefined) return
        const count = (perKey.get(key) ?? 1) - 1
        if (count <= 0) perKey.delete(key)
        else perKey.set(key, count)
      }
      const giveBackRest = () => {
        for (const [key, n] of Array.from(held)) {
          for (let i = 0; i < n; i++) {
            unhold(key)
            ends.slotFreed()
          }
        }
      }
      let settled = false
      return Option.some({
        owner: queue.owner,
        until: new Date(clock.unsafeCurrentTimeMillis() + Duration.toMillis(lease)),
        cancel: Effect.sync(() => {
          if (settled) return
          settled = true
          giveBackRest()
        }),
        adopt: (rows) =>
          Effect.gen(function*() {
            if (settled) return
            settled = true
            const handed: Array<Job<A>> = []
            for (const row of rows as ReadonlyArray<Record<string, unknown>>) {
              const decoded = jobs.decode(row)
              // Left leased: once its lease ends, a claim dead-letters it (as any row that cannot be read).
              if (decoded._tag === "Left") continue
              handed.push(jobOf(row, decoded.right, shares !== undefined))
            }
            if (stopping) {
              // Stopping: given back to the table for any replica's next claim, as interrupted jobs are.
              giveBackRest()
              const released = yield* queue.release(handed.map((job) => job.id))
              if (released > 0) yield* wake(jobs).pipe(Effect.provideService(Notifier, notifier), Effect.catchAllCause(() => Effect.void))
              return
            }
            for (const job of handed) {
              // Its room moves from the reservation to the job, under the key the database computed.
              const key = job.key ?? ""
              const from = held.has(key) ? key : held.keys().next().value
              if (from === undefined) break
              unhold(from)
              if (job.key !== undefined) perKey.set(job.key, (perKey.get(job.key) ?? 0) + 1)
              running.set(job.id, startJob(job, yield* Effect.makeSpan(spanName, spanOptions(job))))
            }
            giveBackRest()
            if (handed.length > 0) started.unsafeOffer(void 0)
          })
      })
    }
    const handoffs = yield* Effect.serviceOption(JobHandoffs)
    if (Option.isSome(handoffs)) yield* handoffs.value.register(jobs.table, reserve)

    yield* Effect.forkScoped(listen)
    yield* Effect.forkScoped(Effect.forever(storeWaiting))
    const heartbeat = Effect.gen(function*() {
      if (running.size === 0) yield* started.take
      yield* Effect.sleep(heartbeatEvery)
      yield* beat
    })
    yield* Effect.forkScoped(Effect.forever(heartbeat))
    // Runs before the heartbeat and the listener stop (finalizers run in reverse).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
        ends.close()
        const inFlight = running.size
        if (inFlight === 0) return
        yield* Effect.logInfo("Stopping: waiting for running jobs").pipe(Effect.annotateLogs({ running: inFlight }))
        // Finalizers are uninterruptible: the wait must be interruptible for the timeout to end it.
        yield* Effect.interruptible(Fiber.awaitAll(Array.from(running.values()))).pipe(Effect.timeoutOption(grace))
        const left = Array.from(running.keys())
        yield* Fiber.interruptAll(Array.from(running.values()))
        ends.close()
        const released = yield* queue.release(left).pipe(Effect.catchAllCause((cause) =>
          Effect.as(Effect.logWarning("Could not release leases; they will expire", cause), 0)
        ))
        if (released > 0) {
          yield* wake(jobs).pipe(Effect.provideService(Notifier, notifier), Effect.catchAllCause(() => Effect.void))
          yield* Effect.logInfo("Released the leases of interrupted jobs").pipe(Effect.annotateLogs({ released }))
        }
      })
    )
    yield* Effect.logDebug("Job runner started").pipe(
      Effect.annotateLogs({ concurrency, batch_size: batchSize, max_per_key: maxPerKey, lease: Duration.format(lease), poll: Duration.format(poll) })
    )
    // Bounded in real time, as a wake-up is (a test's clock may stand still): a LISTEN that hangs delays claims, never stops them.
    yield* Effect.raceFirst(Deferred.await(listening), realSleep(LISTEN_WAIT))
    return yield* Effect.forever(Effect.suspend(() => stopping ? Effect.never : step))
  }).pipe(Effect.scoped, Effect.annotateLogs({ table: jobs.table }))
