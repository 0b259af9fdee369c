/**
 * Worker fibers (CRM push, webhook delivery) run on replicas whose ROLE is
 * `all` or `worker`. Each worker is a never-ending effect forked for the
 * lifetime of the server; the call pipeline registers them here.
 */
import { Clock, Effect, Layer } from "effect"
import type { Role } from "../config/Settings.js"

/** A named worker loop. */
export interface Worker<R = never> {
  readonly name: string
  readonly run: Effect.Effect<never, never, R>
}

/** Whether a replica of `role` runs workers. */
export const runsWorkers = (role: Role): boolean => role === "all" || role === "worker"

/** Whether a replica of `role` serves the public Event API. */
export const servesPublicApi = (role: Role): boolean => role === "all" || role === "api"

/** Forks `workers` for the Layer's lifetime when `role` runs workers. */
export const layer = <R>(role: Role, workers: ReadonlyArray<Worker<R>>): Layer.Layer<never, never, R> =>
  runsWorkers(role)
    ? Layer.scopedDiscard(
      Effect.gen(function*() {
        for (const worker of workers) {
          // Workers keep real time even where a test drives a TestClock: a jump of years would
          // otherwise replay every poll interval in between, one by one.
          yield* Effect.forkScoped(worker.run.pipe(Effect.withClock(Clock.make()), Effect.annotateLogs("worker", worker.name)))
        }
        yield* Effect.logInfo("Workers started").pipe(Effect.annotateLogs("workers", workers.map((w) => w.name).join(",")))
      })
    )
    : Layer.empty
