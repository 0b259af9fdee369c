/**
 * `crm-relay pushes list|replay`: the CRM push jobs the operator watches —
 * the failed ones by default (stopped on Conflict, Auth, Permanent, ... or
 * dead-lettered when the retries ran out) — and replaying one.
 */
import { Command, Options } from "@effect/cli"
import { type Context, Effect } from "effect"
import * as Flags from "./Flags.js"
import { json, print } from "./Output.js"
import type * as Operations from "./PushOperations.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withPushes = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.PushOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./PushOperations.js")), (operations) => operations.withOperations(f))

const list = Command.make(
  "list",
  {
    account: Options.text("account").pipe(Options.optional, Options.withDescription("Only this account's jobs.")),
    status: Flags.status(["failed", "pending", "succeeded"], "Which jobs to list (default: failed)."),
    limit: Options.integer("limit").pipe(Options.withDefault(100), Options.withDescription("At most this many (1 to 1000).")),
    json
  },
  ({ account, json, limit, status }) =>
    withPushes((operations) =>
      Effect.flatMap(
        Effect.flatMap(Flags.statuses(status, ["failed", "pending", "succeeded"] as const, ["failed"]), (statuses) =>
          operations.list({ statuses, accountId: account, limit: Math.min(Math.max(limit, 1), 1000) })),
        (pushes) =>
          print(
            json,
            { pushes },
            pushes.length === 0
              ? "No CRM push jobs match."
              : pushes.map((p) =>
                `${p.id}  call ${p.call_id}  ${p.status}${p.failure === null ? "" : ` (${p.failure})`}` +
                `${p.error_class === null ? "" : `  ${p.error_class}`}  attempts ${p.attempts}` +
                `${p.previous_attempts === 0 ? "" : ` (${p.previous_attempts} before replay)`}` +
                `${p.last_error === null ? "" : `\n    ${p.last_error}`}`
              ).join("\n")
          )
      )
    )
).pipe(Command.withDescription("List CRM push jobs: the failed ones by default, with their error class and last error."))

const replay = Command.make(
  "replay",
  {
    id: Options.text("id").pipe(Options.withDescription("Id of the CRM push job to run again.")),
    force: Options.boolean("force").pipe(
      Options.withDescription("Replay a job that already succeeded too (it pushes the call to the CRM again).")
    ),
    json
  },
  ({ force, id, json }) =>
    withPushes((operations) =>
      Effect.flatMap(operations.replay(id, { force }), (outcome) =>
        print(
          json,
          { id, outcome },
          outcome === "queued"
            ? `Queued CRM push job ${id} again; steps with a stored receipt are not repeated, earlier attempts are kept.`
            : `CRM push job ${id} is already pending; left as it is.`
        ))
    )
).pipe(Command.withDescription("Run a failed CRM push job again, with the same idempotency keys. Stored steps are not repeated and earlier attempts are kept. A job that succeeded needs --force."))

/** `crm-relay pushes`. */
export const command = Command.make("pushes").pipe(
  Command.withDescription("Watch and replay CRM push jobs."),
  Command.withSubcommands([list, replay])
)

