/**
 * The perform-list preview: up to `limit` records of the account's latest
 * deliveries, in any state, carrying only the contact's external id (no
 * name, phone or email; job type and summary empty; booked = the delivery
 * has an external appointment id), or the contract's synthetic sample when
 * the account has no deliveries yet.
 *
 * One record per event: when the fan-out wrote a delivery for each of
 * several subscriptions, the preview shows the event once (as its latest
 * delivery id) rather than once per subscription, so a platform sampling
 * "the last 3" sees three different calls. The read itself is the database
 * function `preview_latest` (store migration 0012).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Events } from "@crm-relay/contract"
import * as Spans from "@crm-relay/store/Spans"
import { Effect, Schema } from "effect"
import type { AccountId } from "./Accounts.js"

const DeliveryRow = Schema.Struct({
  id: Schema.String,
  call_id: Schema.String,
  source: Schema.String,
  contact_external_id: Schema.String,
  appointment_external_id: Schema.NullOr(Schema.String)
})

/** The preview's deliveries of an account as one JSON value (see `Preview.latest`). */
const Latest = Schema.Array(DeliveryRow)

/** Reads preview records. */
export class Preview extends Effect.Service<Preview>()("@crm-relay/events/Preview", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const decodeLatest = Schema.decodeUnknown(Latest)
    // The read is the database function `preview_latest` (its plan is kept per session): one
    // JSON array, in the preview's order, so that it is one value another statement can carry.
    const latest = (accountId: Statement.Fragment, limit: number) =>
      sql`preview_latest(${accountId}, ${Events.clampLimit(Math.trunc(limit))}::integer)`

    const records = (value: unknown) =>
      Effect.map(Effect.orDie(decodeLatest(value)), (rows): ReadonlyArray<Events.PreviewRecord> => {
        if (rows.length === 0) return [Events.SAMPLE_PREVIEW]
        return rows.map((row): Events.PreviewRecord => ({
          id: row.id,
          call_id: row.call_id,
          source: row.source,
          contact: { external_id: row.contact_external_id },
          job_type: "",
          summary: "",
          booked: row.appointment_external_id !== null && row.appointment_external_id !== ""
        }))
      })

    // Runs on a perform-list whose key check did not read the preview: a hot path's span (see Spans).
    const listSpan = Spans.hot("Preview.list")
    const list = (accountId: AccountId, limit: number) =>
      sql<{ readonly records: unknown }>`SELECT ${latest(sql`${accountId}::uuid`, limit)} AS records`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => records(rows[0]?.records))
      )

    return {
      /** Up to `limit` (clamped to 1..20) preview records, or the synthetic sample. */
      list: (accountId: AccountId, limit: number) => listSpan(list(accountId, limit)),
      /**
       * The read of `list` as one SQL value (a JSON array) over the account id `accountId`, an
       * SQL expression: for a statement that learns the account itself (IntegrationKeys.authorize).
       */
      latest,
      /** The records of a value `latest` read (`list`'s answer). */
      records
    }
  })
}) {}
