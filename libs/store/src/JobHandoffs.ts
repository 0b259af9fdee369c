/**
 * Jobs handed straight from their producer to a runner of the same process.
 *
 * A job queued for a runner in this process would otherwise be woken by a
 * notification (through PostgreSQL, back to this process's LISTEN
 * connection) and claimed by a statement of its own. A runner registers here
 * for its table (`JobQueue.run` does, when this service is provided); a
 * producer asks it for room (`reserve`) before its insert, inserts the rows
 * already leased to the runner (`owner`, `until`, attempt 1) in its own
 * statement, and hands them over (`adopt`) with the columns a claim returns;
 * or gives the room back (`cancel`) when it inserted none leased. The lease
 * is the columns', as for a claimed row: if the process dies, it ends and
 * any runner claims the rows again. No runner, or no room (full, or the key
 * at its share, or stopping): none, and the producer queues and notifies.
 */
import { Effect, Option, type Scope } from "effect"

/** Room a runner set aside for jobs its producer is about to insert leased to it. */
export interface Reservation {
  /** The lease owner to insert the rows with. */
  readonly owner: string
  /** The lease end to insert the rows with. */
  readonly until: Date
  /**
   * Runs the inserted rows (each with the columns the table's claim returns:
   * `id`, `attempts`, the select list, `traceparent`, `job_fair_key`) and
   * gives back the room of any that were not inserted. Once: `adopt` or `cancel`.
   */
  readonly adopt: (rows: ReadonlyArray<unknown>) => Effect.Effect<void>
  /** Gives the room back: nothing was inserted leased. */
  readonly cancel: Effect.Effect<void>
}

/** A runner's side: room for jobs of `keys` (one per job; the fairness key, or "" on a table without one). */
export type Reserve = (keys: ReadonlyArray<string>) => Option.Option<Reservation>

/** The runners of this process that take jobs from their producers, by table. */
export class JobHandoffs extends Effect.Service<JobHandoffs>()("@crm-relay/store/JobHandoffs", {
  sync: () => {
    const runners = new Map<string, Reserve>()
    return {
      /** Room for jobs of `keys` in this process's runner of `table`, if there is one with room. */
      reserve: (table: string, keys: ReadonlyArray<string>): Option.Option<Reservation> => {
        const reserve = runners.get(table)
        return reserve === undefined || keys.length === 0 ? Option.none() : reserve(keys)
      },
      /** Registers the runner of `table` for the scope. */
      register: (table: string, reserve: Reserve): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => runners.set(table, reserve)),
          () => Effect.sync(() => runners.get(table) === reserve && runners.delete(table))
        )
    }
  }
}) {}
