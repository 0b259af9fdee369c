import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Queue } from "effect"
import { type Finished, isBatchable, type JobQueue } from "../Statements.js"
import { type FinishExtras, type Job, JobResult } from "../Table.js"

/**
 * How a runner stores its jobs' results: `finish` stores one (logging, never failing, uninterruptible),
 * `storeWaiting` is the loop of the fiber that stores the batchable ones.
 */
export const makeResults = <A>(queue: JobQueue<A>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
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
      // Finished by the handler's own statement, which held the lease.
      if (result._tag === "Complete" && result.stored === true) return Effect.succeed(true)
      // (A batchable result waits for the storing fiber: see `finish`.)
      const extras: FinishExtras = { set: result.set, alongside: result.alongside, log: result.log }
      const change = JobResult.$match(result, {
        Complete: () => queue.complete(job.id, extras),
        Retry: ({ delay, error }) => queue.retry(job.id, delay, error, extras),
        DeadLetter: ({ error }) => queue.deadLetter(job.id, error, extras),
        End: ({ reason, status }) => queue.end(job.id, status, reason, extras)
      })
      return result.record === undefined ? change : sql.withTransaction(Effect.zipRight(result.record, change)).pipe(Effect.orDie)
    }

    const takenOver = (job: Job<A>, result: JobResult) =>
      Effect.logWarning("Job finished after its lease was taken over; its result was not stored").pipe(
        Effect.annotateLogs({ job_id: job.id, result: result._tag })
      )

    const finish = (job: Job<A>, result: JobResult): Effect.Effect<void> =>
      // The common case, a batchable result, in as few steps as it takes: it cannot fail.
      isBatchable(result) && !(result._tag === "Complete" && result.stored === true)
        ? Effect.uninterruptible(Effect.async<void>((resume) => {
          waiting.push([{ id: job.id, result }, (held) => resume(held ? Effect.void : takenOver(job, result))])
          resultsWaiting.unsafeOffer(void 0)
        }))
        : stored(job, result)

    const stored = (job: Job<A>, result: JobResult) =>
      store(job, result).pipe(
        Effect.tap((held) => held ? Effect.void : takenOver(job, result)),
        Effect.catchAllCause((cause) =>
          // The lease will expire and the job run again.
          Effect.logError("Could not store a job's result", cause).pipe(Effect.annotateLogs({ job_id: job.id }))
        ),
        Effect.uninterruptible
      )

    return { finish, storeWaiting } as const
  })
