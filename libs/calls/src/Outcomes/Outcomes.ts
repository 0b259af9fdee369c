/**
 * Call outcomes: `POST /v1/calls/{callId}/outcome` validated (CallOutcome),
 * stored once per call id, and routed in the same transaction — a CRM push
 * job queued, or the event fanned out at once (no bridge traffic), or
 * nothing more (see Routing).
 *
 * A call id is accepted once, ever (the primary key): the same body again is
 * answered as a duplicate of the first acceptance and queues nothing; a
 * different body for a known call id is refused (`OutcomeConflict`, 409).
 * Bodies are compared by the SHA-256 of their canonical JSON encoding, so
 * key order and optional fields left out vs. absent do not matter.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Accounts, Fanout } from "@crm-relay/events"
import { Effect, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { CrmPushJobs } from "../CrmPush/Jobs.js"
import { eventOf, withoutPush } from "./Announcement.js"
import { CallOutcome, type CallOutcomeEncoded } from "@crm-relay/contract/CallOutcome"
import * as Routing from "../Routing.js"
import { Accepted, RouteName, StoredOutcome } from "@crm-relay/contract/Calls"

/** Described in the contract, where the internal API takes it. */
export { Accepted, RouteName, StoredOutcome }

/** The account named by `account_id` does not exist. */
export class UnknownAccount extends Schema.TaggedError<UnknownAccount>()("UnknownAccount", {
  accountId: Schema.String
}) {}

/** The call already has an accepted outcome with a different body. */
export class OutcomeConflict extends Schema.TaggedError<OutcomeConflict>()("OutcomeConflict", {
  callId: Schema.String
}) {}


const encodeOutcome = Schema.encodeSync(CallOutcome)
const decodeOutcome = Schema.decodeUnknown(CallOutcome)

// Canonical JSON: object keys sorted, so equal bodies always digest equally.
const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]))
    : value

/** SHA-256 of the canonical JSON of an encoded outcome. */
export const digest = (encoded: CallOutcomeEncoded): string =>
  createHash("sha256").update(JSON.stringify(canonical(encoded)), "utf8").digest("hex")

const routeNames = { Push: "push", EventOnly: "event", StoreOnly: "store" } as const

/** Accepts and reads call outcomes. */
export class Outcomes extends Effect.Service<Outcomes>()("@crm-relay/calls/Outcomes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = yield* Accounts.Accounts
    const routing = yield* Routing.Routing
    const jobs = yield* CrmPushJobs
    const fanout = yield* Fanout.Fanout

    const insert = SqlSchema.findOne({
      Request: Schema.Struct({
        callId: Schema.String,
        accountId: Schema.String,
        tenantId: Schema.String,
        classification: Schema.String,
        body: Schema.String,
        digest: Schema.String,
        route: RouteName,
        reason: Schema.String
      }),
      Result: Schema.Struct({ call_id: Schema.String }),
      execute: (r) =>
        sql`INSERT INTO call_outcomes (call_id, account_id, tenant_id, classification, body, body_digest, route, route_reason)
            VALUES (${r.callId}, ${r.accountId}, ${r.tenantId}, ${r.classification}, ${r.body}::jsonb, ${r.digest},
              ${r.route}, ${r.reason})
            ON CONFLICT (call_id) DO NOTHING
            RETURNING call_id`
    })
    const existing = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({
        body_digest: Schema.String,
        route: RouteName,
        route_reason: Schema.String,
        event_deliveries: Schema.NullOr(Schema.Int),
        push_job_id: Schema.NullOr(Schema.String)
      }),
      execute: (callId) =>
        sql`SELECT o.body_digest, o.route, o.route_reason, o.event_deliveries, j.id AS push_job_id
            FROM call_outcomes o LEFT JOIN crm_push_jobs j ON j.call_id = o.call_id
            WHERE o.call_id = ${callId}`
    })
    const stored = SqlSchema.findOne({
      Request: Schema.String,
      Result: StoredOutcome,
      execute: (callId) =>
        sql`SELECT call_id, account_id, tenant_id, classification, route, route_reason, event_kind, event_deliveries,
              event_fanned_out_at, received_at, body
            FROM call_outcomes WHERE call_id = ${callId}`
    })
    // Existence only: the credentials are decrypted by the worker, not at acceptance.
    const connected = (accountId: string, tenantId: string) =>
      Effect.map(
        sql<{ one: number }>`SELECT 1 AS one FROM connections WHERE account_id = ${accountId} AND tenant_id = ${tenantId}`,
        (rows) => rows.length > 0
      )
    // Marks the outcome announced unless it already is (the row lock serializes concurrent finishers).
    const markAnnounced = (callId: string, event: Fanout.EventInput) =>
      sql`UPDATE call_outcomes SET event_kind = ${Fanout.kindOf(event)}, event_deliveries = 0, event_fanned_out_at = now()
          WHERE call_id = ${callId} AND event_fanned_out_at IS NULL
          RETURNING call_id`.pipe(Effect.map((rows) => rows.length > 0))

    /**
     * Fans the event of `callId` out once: the first caller marks the outcome
     * announced and inserts the deliveries; later callers (a replayed job, a
     * worker that lost its lease) find it marked and add nothing. Runs in the
     * caller's transaction.
     */
    const announce = Effect.fn("Outcomes.announce")(function*(callId: string, event: Fanout.EventInput) {
      const first = yield* markAnnounced(callId, event).pipe(Effect.orDie)
      if (!first) return Option.none<number>()
      const ids = yield* fanout.enqueue(event)
      yield* sql`UPDATE call_outcomes SET event_deliveries = ${ids.length} WHERE call_id = ${callId}`.pipe(Effect.orDie)
      return Option.some(ids.length)
    })

    const accept = Effect.fn("Outcomes.accept")(function*(callId: string, outcome: CallOutcome) {
      const account = yield* accounts.find(outcome.account_id)
      if (Option.isNone(account)) return yield* new UnknownAccount({ accountId: outcome.account_id })
      const encoded = encodeOutcome(outcome)
      const bodyDigest = digest(encoded)

      return yield* sql.withTransaction(
        Effect.gen(function*() {
          const rules = yield* routing.get(outcome.account_id)
          const needsConnection = account.value.mode === "live" && rules.crm_push
          const route = Routing.decide(outcome, {
            mode: account.value.mode,
            rules,
            connected: needsConnection && (yield* Effect.orDie(connected(outcome.account_id, outcome.tenant_id)))
          })
          const reason = route._tag === "Push" ? "A CRM push job was queued; the event follows when it ends." : route.reason
          const inserted = yield* Effect.orDie(insert({
            callId,
            accountId: outcome.account_id,
            tenantId: outcome.tenant_id,
            classification: outcome.classification,
            body: JSON.stringify(encoded),
            digest: bodyDigest,
            route: routeNames[route._tag],
            reason
          }))
          if (Option.isNone(inserted)) {
            const previous = yield* Effect.orDie(existing(callId))
            if (Option.isNone(previous) || previous.value.body_digest !== bodyDigest) {
              return yield* new OutcomeConflict({ callId })
            }
            const p = previous.value
            return {
              call_id: callId,
              duplicate: true,
              route: p.route,
              reason: p.route_reason,
              ...(p.push_job_id !== null ? { push_job_id: p.push_job_id } : {}),
              ...(p.event_deliveries !== null ? { deliveries: p.event_deliveries } : {})
            } satisfies Accepted
          }
          switch (route._tag) {
            case "Push": {
              const jobId = yield* jobs.enqueue({ callId, accountId: outcome.account_id, tenantId: outcome.tenant_id })
              return { call_id: callId, duplicate: false, route: "push", reason, push_job_id: jobId } satisfies Accepted
            }
            case "EventOnly": {
              const deliveries = yield* announce(callId, eventOf(callId, outcome, withoutPush(outcome)))
              return {
                call_id: callId,
                duplicate: false,
                route: "event",
                reason,
                deliveries: Option.getOrElse(deliveries, () => 0)
              } satisfies Accepted
            }
            case "StoreOnly":
              return { call_id: callId, duplicate: false, route: "store", reason } satisfies Accepted
          }
        })
      ).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    return {
      accept,
      announce,
      /** The stored outcome of `callId`, if any. */
      find: Effect.fn("Outcomes.find")(function*(callId: string) {
        return yield* Effect.orDie(stored(callId))
      }),
      /** The decoded outcome body of `callId` (for the push worker). */
      load: Effect.fn("Outcomes.load")(function*(callId: string) {
        const row = yield* Effect.orDie(stored(callId))
        if (Option.isNone(row)) return Option.none<CallOutcome>()
        return Option.some(yield* Effect.orDie(decodeOutcome(row.value.body)))
      })
    }
  })
}) {}
