/**
 * The receipts of a CRM push job, one per write operation: the idempotency
 * key sent and the receipt believed (or, for an appointment the bridge
 * refused, why). Stored as soon as a step ends, so a re-run of the job skips
 * the steps that already have one.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { StepOutcome, StoredStep } from "@crm-relay/contract/Calls"

/** Described in the contract, where the internal API takes it. */
export { StepOutcome, StoredStep }


/** Reads and stores the steps of push jobs. */
export class CrmPushReceipts extends Effect.Service<CrmPushReceipts>()("@crm-relay/calls/CrmPushReceipts", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ofJob = SqlSchema.findAll({
      Request: Schema.String,
      Result: StoredStep,
      execute: (jobId) =>
        sql`SELECT operation, idempotency_key, outcome, receipt FROM crm_push_receipts
            WHERE job_id = ${jobId} ORDER BY seq`
    })
    const insert = SqlSchema.void({
      Request: Schema.Struct({ jobId: Schema.String, step: StoredStep }),
      execute: ({ jobId, step }) =>
        sql`INSERT INTO crm_push_receipts (job_id, operation, idempotency_key, outcome, receipt)
            VALUES (${jobId}, ${step.operation}, ${step.idempotency_key}, ${step.outcome}, ${JSON.stringify(step.receipt)}::jsonb)
            ON CONFLICT (job_id, operation) DO NOTHING`
    })
    return {
      /** The steps stored for `jobId`, oldest first. */
      list: (jobId: string): Effect.Effect<ReadonlyArray<StoredStep>> => Effect.orDie(ofJob(jobId)),
      /** Stores a step; a step already stored for that operation is kept (the first receipt wins). */
      put: (jobId: string, step: StoredStep): Effect.Effect<void> => Effect.orDie(insert({ jobId, step }))
    }
  })
}) {}
