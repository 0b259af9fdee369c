/**
 * Replaying a stopped JobQueue row — a CRM push job or a webhook delivery —
 * answers the same way on the internal API (202) and in the CLI: the row is
 * queued again, or it was still waiting or running and is left as it is.
 */
import type { JobQueue } from "@crm-relay/store"
import type { ReplayAnswer } from "@crm-relay/contract/InternalApi/ReplayAnswer"
import { Effect } from "effect"


/** A replay of a row that exists. */
export type Replayed = ReplayAnswer["outcome"]

/**
 * The outcome of a replay, or `unknown()` when no row has that id, or
 * `completed()` when the row succeeded and the replay kept it as it is.
 */
export const found = <E, C = E>(unknown: () => E, completed?: () => C) =>
(outcome: JobQueue.ReplayOutcome): Effect.Effect<Replayed, E | C> =>
  outcome === "not_found"
    ? Effect.fail(unknown())
    : outcome === "completed"
    ? (completed === undefined ? Effect.dieMessage("A replay kept a completed job that it was not asked to keep.") : Effect.fail(completed()))
    : Effect.succeed(outcome)
