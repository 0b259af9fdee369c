/**
 * CRM push jobs: one row per call in `crm_push_jobs`, a `JobQueue` table.
 *
 * States: `pending` (due at `next_attempt_at`; leased while a worker runs
 * it) → `succeeded`, or `failed` with `error_class`: `Conflict`, `Auth`,
 * `Permanent`, `NotSupported` or `NotConfigured` (stopped at once), or
 * `Transient` (dead-lettered: the retry schedule ended). Failed jobs are
 * listed for the operator and can be replayed (pending again, same row, same
 * stored receipts, so steps already done are not repeated).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as JobQueue from "@crm-relay/store/JobQueue"
import * as TraceContext from "@crm-relay/store/TraceContext"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Effect, Option, Schema } from "effect"
import { CrmPushReceipts, type StoredStep } from "./Receipts.js"
import { ErrorClass, PushJob, PushStatus } from "@crm-relay/contract/Calls"

/** Described in the contract, where the internal API takes it. */
export { ErrorClass, PushJob, PushStatus }

/** What a claim of a push job returns besides its id and attempt. */
export const PushJobRow = Schema.Struct({
  call_id: Schema.String,
  account_id: Schema.String,
  tenant_id: Schema.String,
  first_attempt_at: Schema.NullOr(Schema.DateFromSelf)
})
export type PushJobRow = typeof PushJobRow.Type

/** The queue table of push jobs. */
export const jobTable = JobQueue.table({ table: "crm_push_jobs", completedStatus: "succeeded", row: PushJobRow, traced: true })


/** A push job with its stored steps. */
export interface PushJobDetail extends PushJob {
  readonly receipts: ReadonlyArray<StoredStep>
}

/** How a replay went. */
export type ReplayOutcome = JobQueue.ReplayOutcome

const columns = `id, call_id, account_id, tenant_id, status, attempts, previous_attempts, next_attempt_at, error_class, last_error,
  result, replays, created_at, updated_at, finished_at`

/** Queues, lists and replays push jobs. */
export class CrmPushJobs extends Effect.Service<CrmPushJobs>()("@crm-relay/calls/CrmPushJobs", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const receipts = yield* CrmPushReceipts
    // Queue statements run on this service's database, whoever calls them.
    const queue = yield* JobQueue.controls(jobTable)
    // A replay also starts the job's own record afresh: a new first attempt, no error class, one more replay;
    // the attempts so far are added to the history (the right-hand side reads the row before the update).
    const replayed = sql`previous_attempts = previous_attempts + attempts, first_attempt_at = NULL, error_class = NULL, finished_at = NULL, replays = replays + 1,
      updated_at = now()`
    const select = sql.literal(columns)
    const insert = SqlSchema.single({
      Request: Schema.Struct({
        callId: Schema.String,
        accountId: Schema.String,
        tenantId: Schema.String,
        traceparent: Schema.NullOr(Schema.String)
      }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: (r) =>
        sql`INSERT INTO crm_push_jobs (call_id, account_id, tenant_id, traceparent)
            VALUES (${r.callId}, ${r.accountId}, ${r.tenantId}, ${r.traceparent}) RETURNING id`
    })
    const byId = SqlSchema.findOne({
      Request: Schema.String,
      Result: PushJob,
      execute: (id) => sql`SELECT ${select} FROM crm_push_jobs WHERE id = ${id}`
    })
    const byCall = SqlSchema.findOne({
      Request: Schema.String,
      Result: PushJob,
      execute: (callId) => sql`SELECT ${select} FROM crm_push_jobs WHERE call_id = ${callId}`
    })
    const listing = SqlSchema.findAll({
      Request: Schema.Struct({
        statuses: Schema.Array(Schema.String),
        accountId: Schema.NullOr(Schema.String),
        limit: Schema.Int
      }),
      Result: PushJob,
      execute: ({ accountId, limit, statuses }) =>
        sql`SELECT ${select} FROM crm_push_jobs
            WHERE status IN ${sql.in(statuses)}
              ${accountId === null ? sql`` : sql`AND account_id = ${accountId}`}
            ORDER BY updated_at DESC, id DESC
            LIMIT ${limit}`
    })

    const detail = (job: PushJob) => Effect.map(receipts.list(job.id), (steps): PushJobDetail => ({ ...job, receipts: steps }))

    return {
      /** Queues the push of call `callId` in the caller's transaction and wakes the workers at COMMIT. */
      enqueue: Effect.fn("CrmPushJobs.enqueue")(function*(input: {
        readonly callId: string
        readonly accountId: string
        readonly tenantId: string
      }) {
        // The worker continues this request's trace.
        const row = yield* Effect.orDie(insert({ ...input, traceparent: yield* TraceContext.current }))
        yield* queue.wake
        return row.id
      }),

      /** The job `id` with its receipts. */
      find: Effect.fn("CrmPushJobs.find")(function*(id: string) {
        if (!isUuid(id)) return Option.none<PushJobDetail>()
        const job = yield* Effect.orDie(byId(id))
        return Option.isNone(job) ? Option.none<PushJobDetail>() : Option.some(yield* detail(job.value))
      }),

      /** The job of call `callId`, with its receipts. */
      findByCall: Effect.fn("CrmPushJobs.findByCall")(function*(callId: string) {
        const job = yield* Effect.orDie(byCall(callId))
        return Option.isNone(job) ? Option.none<PushJobDetail>() : Option.some(yield* detail(job.value))
      }),

      /** Jobs in `statuses` (default: failed), newest change first, optionally of one account. */
      list: Effect.fn("CrmPushJobs.list")(function*(options: {
        readonly statuses?: ReadonlyArray<PushStatus>
        readonly accountId?: string
        readonly limit?: number
      } = {}) {
        const accountId = options.accountId ?? null
        if (accountId !== null && !isUuid(accountId)) return [] as ReadonlyArray<PushJob>
        return yield* Effect.orDie(listing({
          statuses: options.statuses ?? ["failed"],
          accountId,
          limit: Math.min(Math.max(Math.trunc(options.limit ?? 100), 1), 1000)
        }))
      }),

      /**
       * Queues a failed job again (due now, fresh schedule, earlier attempts
       * kept in `previous_attempts`, receipts kept); a pending job is left as
       * it is, and a succeeded one too (`completed`) unless `force`.
       */
      replay: Effect.fn("CrmPushJobs.replay")(function*(id: string, options: { readonly force?: boolean } = {}) {
        if (!isUuid(id)) return "not_found" as ReplayOutcome
        const outcome = yield* queue.replay(id, { assignments: replayed, keepCompleted: options.force !== true })
        if (outcome === "queued") yield* Audit.record("push.replayed", { push_id: id, forced: options.force === true })
        return outcome
      })
    }
  }),
  dependencies: [CrmPushReceipts.Default]
}) {}
