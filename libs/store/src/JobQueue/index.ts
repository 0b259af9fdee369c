/**
 * A durable job queue over an ordinary table: the CRM push jobs and the
 * webhook deliveries are rows that workers claim, run and finish.
 *
 * The table it runs over is declared with `table` (see Table.ts for the
 * columns a queue table needs).
 *
 * How it works:
 * - A row is due when `status = 'pending'`, `next_attempt_at <= now` and it
 *   holds no live lease. One statement claims up to N due rows
 *   (`FOR UPDATE SKIP LOCKED`, so concurrent claimers never take the same
 *   row), sets the lease and counts the attempt. The lease is held by the
 *   columns, never by an open transaction, so a job may run for as long as
 *   it likes on PGlite (one session) and on a PostgreSQL pool alike.
 * - While a job runs, one heartbeat statement per runner extends the leases
 *   of all its jobs. A runner that dies (SIGKILL, lost host) stops the
 *   heartbeat; its leases expire and another runner claims the rows again:
 *   nothing is lost, and the job runs again (handlers must be idempotent).
 * - On a fair table (`Fairness`: a key column, e.g. the receiver origin,
 *   and a group column, e.g. the account) a runner holds at most
 *   `maxPerKey` jobs of one key (default a quarter of its slots), and a
 *   claim takes the oldest due rows of each key with room (walking the keys
 *   over a `(key, next_attempt_at)` index of the pending rows, so a full
 *   key's backlog costs nothing), the groups taking turns: a silent target
 *   only slows its own jobs. The bound is per runner, held in memory: a
 *   killed runner's slots come back with its leases.
 * - Finishing (complete, retry at a time, dead-letter, end) is guarded by the
 *   lease owner, so a runner that lost its lease can never overwrite the
 *   work of the runner that took the row over. A runner stores the results
 *   that are waiting together, in one statement for all of them (their
 *   extra columns and attempt log rows included); a result with a statement
 *   alongside is one statement of its own, or a transaction when the handler
 *   needs more.
 * - On embedded PGlite the database is this process's alone, so at start a
 *   runner takes back leases of other (dead) processes at once.
 * - Runners wake on LISTEN/NOTIFY (`wake`, sent by whoever inserts jobs), on
 *   the next due time they computed, and on a poll interval as a safety net
 *   (short on PGlite, long on PostgreSQL). Jobs' ends wake the claimer too,
 *   gathered: once a few slots were freed since the last claim began, and at
 *   the latest a short window (`CLAIM_WINDOW`) after the first of them, so a
 *   busy key's backlog is claimed a few rows at a time, never left to the poll.
 *   A job holds its slot (and its key's share) while its handler runs: once
 *   the handler decided, the slot is free while the result is being stored.
 * - Interrupting a runner (clean shutdown) stops claiming, lets running jobs
 *   finish for a grace period, interrupts the rest and releases their leases
 *   in one statement (the attempt is given back), so another replica takes
 *   them at once.
 *
 * Time comes from Effect's `Clock` (so tests drive leases and retries with
 * the `TestClock`); replicas sharing a database need synchronized clocks
 * (NTP), well within the lease duration.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import {
  Cause,
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Fiber,
  FiberRef,
  FiberRefs,
  HashMap,
  Metric,
  MetricBoundaries,
  MetricLabel,
  Option,
  Queue,
  Runtime,
  Stream,
  Tracer
} from "effect"
import { DatabaseInfo } from "../Database.js"
import { JobHandoffs, type Reservation } from "../JobHandoffs.js"
import { Notifier } from "../Notifier.js"
import * as TraceContext from "../TraceContext.js"
import { wake } from "./Controls.js"
import { jobOf } from "./internal/jobOf.js"
import { type ClaimShares, type Finished, isBatchable, make, processOwnerPrefix } from "./Statements.js"
import { type FinishExtras, type Job, JobResult, type JobTable } from "./Table.js"

export * from "./Controls.js"
export * from "./Statements.js"
export * from "./Table.js"

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

/**
 * Takes back at once the leases of `jobs` held by other processes, keeping
 * this process's (in-process runners sharing a database keep theirs). Only
 * for a database that belongs to this process alone (embedded PGlite): there
 * another process's lease can only be a dead process's, from before a
 * restart. The attempts stay counted. Returns how many were taken back.
 */
export const releaseOtherProcesses = <A>(jobs: JobTable<A>): Effect.Effect<number, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = processOwnerPrefix()
    const rows = yield* sql`UPDATE ${sql(jobs.table)} SET lease_owner = NULL, lease_expires_at = NULL
      WHERE status = 'pending' AND lease_owner IS NOT NULL AND left(lease_owner, ${prefix.length}) <> ${prefix}
      RETURNING id`.pipe(Effect.orDie)
    return rows.length
  })

/** Jobs run, by queue (table) and result: completed, retried, dead_lettered, ended (metric). */
export const jobsRun = Metric.counter("crm_relay_jobs_total", {
  description: "Job runs (one per attempt) by queue table (crm_push_jobs, deliveries) and result: completed, retried, dead_lettered or ended.",
  incremental: true
})
/** Time a job's attempt took, handler and result stored, by queue (metric). */
export const jobSeconds = Metric.histogram(
  "crm_relay_job_duration_seconds",
  MetricBoundaries.fromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "Duration of one job attempt in seconds (handler and result stored), by queue table and result."
)

const resultLabel = { Complete: "completed", Retry: "retried", DeadLetter: "dead_lettered", End: "ended" } as const

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
    const sql = yield* SqlClient.SqlClient
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

    // A job's end frees a slot that due work may wait for (a key at its share, a full runner). A claim per
    // end would be one statement per job under load, so ends are gathered: the claimer wakes once
    // `claimRoom` slots were freed since its last claim began, or `CLAIM_WINDOW` after the first of them.
    // Each end is thus followed, within the window, by a claim that sees its slot free: none waits for the
    // poll. The window is real time, as a wake-up is (it must not wait for a test's clock to move).
    const claimRoom = Math.max(1, Math.floor(maxPerKey / 4))
    const windowMillis = Duration.toMillis(CLAIM_WINDOW)
    let freed = 0
    let window: ReturnType<typeof setTimeout> | undefined
    const closeWindow = () => {
      if (window !== undefined) clearTimeout(window)
      window = undefined
    }
    const wakeForEnds = () => {
      closeWindow()
      wakeUp.unsafeOffer(void 0)
    }
    // Only while due work may be waiting for a slot: the runner was full, or a key at its share, when it
    // last claimed. Otherwise a job's end leaves nothing behind to claim (at a low rate, a claim per end
    // that finds nothing, and a next-due reading after it).
    let roomBound = false
    const slotFreed = () => {
      if (!roomBound) return
      freed++
      if (freed >= claimRoom) wakeForEnds()
      else if (window === undefined) window = setTimeout(wakeForEnds, windowMillis)
    }
    // As a claim begins, before it reads the room of each key: it claims for every end so far.
    const claimBegins = () => {
      freed = 0
      closeWindow()
    }

    // Batchable results are stored by one fiber, all that are waiting in one statement (group commit:
    // no wait when idle, fewer round trips under load); the others in a statement (or transaction) of their own.
    // A job waits for its result on a plain callback (no Deferred, no queue offer per job): under a
    // backlog this is paid once per delivery.
    const waiting: Array<readonly [Finished, (held: boolean) => void]> = []
    const resultsWaiting = yield* Queue.sliding<void>(1)
    const storeWaiting = Effect.zipRight(
      resultsWaiting.take,
      Effect.suspend(() => {
        const batch = waiting.splice(0, 256)
        if (batch.length === 0) return Effect.void
        if (waiting.length > 0) resultsWaiting.unsafeOffer(void 0)
        return queue.finishMany(batch.map(([finished]) => finished)).pipe(
          Effect.catchAllCause((cause) =>
            // The leases will expire and the jobs run again.
            Effect.as(Effect.logError("Could not store the results of jobs", cause), new Set<string>())
          ),
          Effect.map((held) => {
            for (const [finished, done] of batch) done(held.has(finished.id))
          })
        )
      })
    )

    const store = (job: Job<A>, result: JobResult): Effect.Effect<boolean> => {
      if (isBatchable(result)) {
        return Effect.async<boolean>((resume) => {
          waiting.push([{ id: job.id, result }, (held) => resume(Effect.succeed(held))])
          resultsWaiting.unsafeOffer(void 0)
        })
      }
      const extras: FinishExtras = { set: result.set, alongside: result.alongside, log: result.log }
      const change = JobResult.$match(result, {
        Complete: () => queue.complete(job.id, extras),
        Retry: ({ delay, error }) => queue.retry(job.id, delay, error, extras),
        DeadLetter: ({ error }) => queue.deadLetter(job.id, error, extras),
        End: ({ reason, status }) => queue.end(job.id, status, reason, extras)
      })
      return result.record === undefined ? change : sql.withTransaction(Effect.zipRight(result.record, change)).pipe(Effect.orDie)
    }

    const finish = (job: Job<A>, result: JobResult) =>
      store(job, result).pipe(
        Effect.tap((held) =>
          held
            ? Effect.void
            : Effect.logWarning("Job finished after its lease was taken over; its result was not stored").pipe(
              Effect.annotateLogs({ job_id: job.id, result: result._tag })
            )
        ),
        Effect.catchAllCause((cause) =>
          // The lease will expire and the job run again.
          Effect.logError("Could not store a job's result", cause).pipe(Effect.annotateLogs({ job_id: job.id }))
        ),
        Effect.uninterruptible
      )

    // The labels of each result, made once: a metric keeps one hook per label array it has seen, so
    // updating with the same array costs no key hashing per job.
    const labelsOf = (result: JobResult["_tag"]) => [
      MetricLabel.make("queue", jobs.table),
      MetricLabel.make("result", resultLabel[result])
    ]
    const labels = { End: labelsOf("End"), Complete: labelsOf("Complete"), Retry: labelsOf("Retry"), DeadLetter: labelsOf("DeadLetter") }
    const clock = yield* Effect.clock
    const observe = (result: JobResult, started: bigint) => {
      const tags = labels[result._tag]
      jobsRun.unsafeUpdate(1, tags)
      jobSeconds.unsafeUpdate(Number(clock.unsafeCurrentTimeNanos() - started) / 1e9, tags)
    }

    // One span per attempt, in the trace that queued the job when the table stores it.
    const spanOptions = (job: Job<A>): Tracer.SpanOptions => {
      const parent = jobs.traced ? TraceContext.parse(job.traceparent) : Option.none()
      return {
        kind: "consumer",
        captureStackTrace: false,
        attributes: { "job.queue": jobs.table, "job.id": job.id, "job.attempt": job.attempt },
        ...(Option.isSome(parent) ? { parent: parent.value } : { root: true })
      }
    }

    // A job gives back its slot (and its key's share) once its handler decided, before its result is
    // stored: the target is no longer busy with it, and the next claim need not wait for the store.
    const giveBack = (job: Job<A>) => {
      if (job.key !== undefined) {
        const left = (perKey.get(job.key) ?? 1) - 1
        if (left <= 0) perKey.delete(job.key)
        else perKey.set(job.key, left)
      }
      slotFreed()
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

    const runJob = (job: Job<A>, span: Tracer.Span) => {
      const started = clock.unsafeCurrentTimeNanos()
      return Effect.suspend(() => handler(job)).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
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
        }),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            if (span.status._tag !== "Ended") span.end(timingEnabled ? clock.unsafeCurrentTimeNanos() : BigInt(0), exit)
            running.delete(job.id)
            // Stopped before its handler decided (interrupted): its slot is given back now.
            if (!finishing.delete(job.id)) giveBack(job)
          })
        ),
        Effect.catchAllCause(() => Effect.void)
      )
    }

    // A daemon (the runner's finalizer, not the claiming fiber, decides when it stops), started on the
    // next tick, after the claimer recorded it among the running jobs.
    const startJob = (job: Job<A>, span: Tracer.Span): Fiber.RuntimeFiber<void> =>
      Runtime.runFork(Runtime.make({ ...runtime, context: Context.add(runtime.context, Tracer.ParentSpan, span) }), runJob(job, span), {
        immediate: false,
        updateRefs: (refs, fiberId) =>
          FiberRefs.updateAs(refs, {
            fiberId,
            fiberRef: FiberRef.currentLogAnnotations,
            value: HashMap.set(HashMap.set(annotations, "job_id", job.id), "attempt", job.attempt)
          })
      })

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
        if (untilDue && busy.length > 0) roomBound = true
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
        roomBound = true
        return yield* idle(false)
      }
      const want = Math.min(free, batchSize)
      claimBegins()
      // The claim leaves the due rows of keys at their share now: their jobs' ends (even during the claim) wake it.
      roomBound = busyKeys().length > 0
      const heldAtClaim = shares === undefined ? undefined : new Map(perKey)
      const claimed = yield* queue.claim(want, lease, shares)
      failures = 0
      // A key the claim filled to the room it had may have due rows left: its jobs' ends wake the claimer.
      if (heldAtClaim !== undefined && !roomBound) {
        const taken = new Map<string, number>()
        for (const job of claimed) if (job.key !== undefined) taken.set(job.key, (taken.get(job.key) ?? 0) + 1)
        for (const [key, n] of taken) if (n >= maxPerKey - (heldAtClaim.get(key) ?? 0)) roomBound = true
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
      if (claimed.length < want) yield* idle(claimed.length === 0 || !roomBound)
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
            slotFreed()
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
        closeWindow()
        const inFlight = running.size
        if (inFlight === 0) return
        yield* Effect.logInfo("Stopping: waiting for running jobs").pipe(Effect.annotateLogs({ running: inFlight }))
        // Finalizers are uninterruptible: the wait must be interruptible for the timeout to end it.
        yield* Effect.interruptible(Fiber.awaitAll(Array.from(running.values()))).pipe(Effect.timeoutOption(grace))
        const left = Array.from(running.keys())
        yield* Fiber.interruptAll(Array.from(running.values()))
        closeWindow()
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
