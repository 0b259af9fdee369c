/**
 * The fan-out worker: turns an accepted event (an `events` row, store
 * migration 0017, written by the outcome intake) into its deliveries.
 *
 * The `events` table is a JobQueue table (`pending` → `done`). A claimed
 * event is fanned out a batch at a time (`event_fan_out_2`: the next
 * subscriptions in insertion order, one statement that inserts their
 * deliveries, moves the event's cursor, or finishes the event with its last
 * batch, and wakes the delivery runners at COMMIT), under the event's lease, which the runner's heartbeat keeps alive
 * however many batches there are. A worker that dies mid-way loses its
 * lease; another claims the event and goes on from the cursor, and a batch
 * done twice inserts nothing twice (one delivery per event and subscription):
 * every subscription gets exactly one delivery id, at least once.
 *
 * Who gets the event was fixed when it was accepted (the matching
 * subscriptions then); a subscription removed or disabled since is skipped.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { JobQueue, Notifier } from "@crm-relay/store"
import { Duration, Effect, Schema } from "effect"
import { DELIVERIES_CHANNEL } from "./Fanout.js"

/** The channel that wakes the fan-out runners: the JobQueue channel of the `events` table. */
export const EVENTS_CHANNEL = "jobs:events"

/** Subscriptions one fan-out statement turns into deliveries. */
export const BATCH = 500

/** The events table as a job queue: a claim returns the event's account (the rest the fan-out reads itself). */
export const table = JobQueue.table({
  table: "events",
  completedStatus: "done",
  channel: EVENTS_CHANNEL,
  row: Schema.Struct({ account_id: Schema.String }),
  traced: true
})

/** Runner settings of the fan-out worker. */
export interface EventFanoutOptions extends JobQueue.RunOptions {
  /** Subscriptions per statement. Default `BATCH`. */
  readonly batch?: number
}

/**
 * Defaults: 8 events at once (each is a loop of statements, so few are enough to keep the database
 * busy), 30 s leases kept by the heartbeat.
 */
export const DEFAULT_OPTIONS: EventFanoutOptions = { concurrency: 8, lease: Duration.seconds(30) }

/** The handler of one claimed event, fanning out under the lease of `owner`. */
export const makeHandler = (owner: string, batch: number = BATCH) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const notifier = yield* Notifier.Notifier
    const channel = notifier.channel(DELIVERIES_CHANNEL)
    const step = (id: string) =>
      sql<{ more: boolean; held: boolean; finished: boolean }>`SELECT more, held, finished
        FROM event_fan_out_2(${id}, ${owner}, ${batch}, ${channel})`.pipe(
        Effect.map((rows) => rows[0] ?? { more: false, held: false, finished: false })
      )
    return (job: JobQueue.Job<typeof table extends JobQueue.JobTable<infer A> ? A : never>) =>
      Effect.gen(function*() {
        for (;;) {
          const { finished, held, more } = yield* step(job.id)
          // Its lease was taken over (this worker was too slow): the new holder goes on from the cursor.
          if (!held) return JobQueue.JobResult.Retry({ delay: Duration.zero, error: "The event's lease was lost during its fan-out." })
          // The last batch's statement finished the event too (its own commit saved).
          if (!more) return JobQueue.JobResult.Complete({ stored: finished })
        }
      }).pipe(
        // The database failed mid-way: the event is fanned out again from its cursor (nothing twice).
        Effect.catchAll((error) =>
          Effect.succeed(JobQueue.JobResult.Retry({ delay: Duration.seconds(1), error: `The fan-out failed: ${error.message}` }))
        ),
        Effect.withSpan("EventFanout.fanOut", { attributes: { "event.id": job.id } })
      )
  })

/** Fans out accepted events until interrupted (interruption is the clean shutdown, as for any JobQueue runner). */
export const run = (options: EventFanoutOptions = {}): Effect.Effect<never, never, SqlClient.SqlClient | Notifier.Notifier> =>
  Effect.suspend(() => {
    const owner = options.owner ?? JobQueue.makeOwner()
    return Effect.flatMap(
      makeHandler(owner, options.batch),
      (handler) => JobQueue.run(table, handler, { ...DEFAULT_OPTIONS, ...options, owner })
    )
  })

/**
 * Fans out, here and now, every event that is due and unleased, one at a time, as a runner would (the
 * same claim, handler and result); answers how many were finished. For tools and tests that run no
 * runner; a server's fan-out is its worker's (`run`).
 */
export const drain = (batch: number = BATCH): Effect.Effect<number, never, SqlClient.SqlClient | Notifier.Notifier> =>
  Effect.gen(function*() {
    const queue = yield* JobQueue.make(table)
    const handle = yield* makeHandler(queue.owner, batch)
    let finished = 0
    for (;;) {
      const [job] = yield* queue.claim(1, Duration.seconds(30))
      if (job === undefined) return finished
      const result = yield* handle(job)
      if (result._tag === "Complete" && (result.stored === true || (yield* queue.complete(job.id)))) finished++
      else yield* queue.release([job.id])
    }
  })
