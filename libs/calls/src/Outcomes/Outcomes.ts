/**
 * Call outcomes: `POST /v1/calls/{callId}/outcome` validated (CallOutcome),
 * stored once per call id, and routed in the same transaction — a CRM push
 * job queued, or the event fanned out at once (no bridge traffic), or
 * nothing more (see Routing).
 *
 * A call id is accepted once, ever (the primary key): the same body again is
 * answered as a duplicate of the first acceptance and queues nothing; a
 * different body for a known call id is refused (`OutcomeConflict`, 409).
 * Bodies are compared as stored, encoded and as jsonb, so key order and
 * optional fields left out vs. absent do not matter (a digest of the
 * canonical JSON was stored for this before store migration 0020).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Deliveries, EventFanout, Fanout } from "@crm-relay/events"
import { JobHandoffs, Notifier } from "@crm-relay/store"
import { isUuid } from "@crm-relay/store/Ids"
import * as TraceContext from "@crm-relay/store/TraceContext"
import { Clock, Effect, Exit, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { CrmPushJobs } from "../CrmPush/Jobs.js"
import { eventOf, withoutPush } from "@crm-relay/events/Announcement"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
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

const routeNames = { Push: "push", EventOnly: "event", StoreOnly: "store" } as const

/** The `call_outcomes` row of an accepted outcome. */
const OutcomeRow = Schema.Struct({
  callId: Schema.String,
  accountId: Schema.String,
  tenantId: Schema.String,
  classification: Schema.String,
  body: Schema.String,
  route: RouteName,
  reason: Schema.String
})

/** What routing an outcome reads (see `facts`). */
const Facts = Schema.Struct({
  mode: Schema.Literal("live", "demo", "sandbox"),
  crm_push: Schema.NullOr(Schema.Boolean),
  classifications: Schema.NullOr(Schema.Array(Schema.String)),
  connected: Schema.Boolean
})

/** The facts of one account (tenant, event kind) and their JSON as the database wrote it. */
interface Known {
  readonly facts: typeof Facts.Type
  readonly json: string
}

/** How many accounts' facts a replica remembers (see `accept`). */
const MAX_KNOWN = 10_000

const decodeFactsValue = Schema.decodeUnknown(Facts)

// NULL (no such account) is none; the JSON is kept to compare with what the database reads next time.
const decodeFacts = (value: unknown) =>
  value === null
    ? Effect.succeed(Option.none<Known>())
    : Effect.map(decodeFactsValue(value), (facts) => Option.some<Known>({ facts, json: JSON.stringify(value) }))

/**
 * At most this many deliveries are written by the intake itself (migration 0019): an outcome whose event goes
 * to this many subscriptions or fewer (the common account has one) is fanned out in its own statement and its
 * deliveries handed to this process's delivery runner, skipping the fan-out runner, a notification and a claim.
 * A constant, so one intake's cost stays bounded whatever the account's size; above it the fan-out runner
 * writes them in batches.
 */
export const INLINE = 8

/** Facts found changed this many times in a row for one outcome: something is wrong, not merely busy. */
const MAX_DECISIONS = 5

/** Accepts and reads call outcomes. */
export class Outcomes extends Effect.Service<Outcomes>()("@crm-relay/calls/Outcomes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const notifier = yield* Notifier.Notifier
    const jobs = yield* CrmPushJobs
    const fanout = yield* Fanout.Fanout
    // The fan-out runner of this process (ROLE all), when there is one: it takes the event straight from the
    // intake when it has room (see `insertAnnounced`).
    const handoffs = yield* Effect.serviceOption(JobHandoffs.JobHandoffs)

    const insert = SqlSchema.findOne({
      Request: OutcomeRow,
      Result: Schema.Struct({ call_id: Schema.String }),
      execute: (r) =>
        sql`INSERT INTO call_outcomes (call_id, account_id, tenant_id, classification, body, route, route_reason)
            VALUES (${r.callId}, ${r.accountId}, ${r.tenantId}, ${r.classification}, ${r.body}::jsonb, ${r.route}, ${r.reason})
            ON CONFLICT (call_id) DO NOTHING
            RETURNING call_id`
    })
    // A repeat is the same body: compared as jsonb (key order aside, as the digest of the canonical JSON
    // compared before migration 0020, which stopped storing it).
    const existing = SqlSchema.findOne({
      Request: Schema.Struct({ callId: Schema.String, body: Schema.String }),
      Result: Schema.Struct({
        same_body: Schema.Boolean,
        route: RouteName,
        route_reason: Schema.String,
        event_deliveries: Schema.NullOr(Schema.Int),
        push_job_id: Schema.NullOr(Schema.String)
      }),
      execute: ({ body, callId }) =>
        sql`SELECT o.body = ${body}::jsonb AS same_body, o.route, o.route_reason, o.event_deliveries, j.id AS push_job_id
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
    // Marks the outcome announced unless it already is (the row lock serializes concurrent finishers).
    const markAnnounced = (callId: string, event: Fanout.EventInput) =>
      sql`UPDATE call_outcomes SET event_kind = ${Fanout.kindOf(event)}, event_deliveries = 0, event_fanned_out_at = now()
          WHERE call_id = ${callId} AND event_fanned_out_at IS NULL
          RETURNING call_id`.pipe(Effect.map((rows) => rows.length > 0))

    // What the route of an outcome needs, as one JSON value: the account's mode, its routing rules (none
    // stored: the defaults) and whether the tenant has a bridge (existence only: the credentials are decrypted
    // by the worker, not at acceptance). NULL: no such account. Migration 0017's function (0014's without the
    // subscriptions, whose list grew with their number), planned once per session.
    const readFacts = (accountId: string, tenantId: string) =>
      sql<{ facts: unknown }>`SELECT call_outcome_facts_2(${accountId}, ${tenantId}) AS facts`.pipe(
        Effect.flatMap((rows) => decodeFacts(rows[0]?.facts ?? null)),
        Effect.orDie
      )

    // The facts each account (tenant, event kind) had at its last outcome, so that the next one is a single
    // statement: it re-reads them and writes only if they are still the same (see `insertAnnounced`).
    const known = new Map<string, Known>()
    const remember = (key: string, facts: Option.Option<Known>) => {
      known.delete(key)
      if (Option.isNone(facts)) return
      if (known.size >= MAX_KNOWN) known.delete(known.keys().next().value!)
      known.set(key, facts.value)
    }

    // The receiver origins of each account's (tenant, event kind) last inline fan-out: the room asked of the
    // delivery runner for the next one (its share per origin is checked before the rows exist). Unknown (the
    // first outcome, or the last one went through the fan-out runner): room is asked of the fan-out runner.
    const origins = new Map<string, ReadonlyArray<string>>()
    const rememberOrigins = (key: string, value: ReadonlyArray<string> | null) => {
      origins.delete(key)
      if (value === null) return
      if (origins.size >= MAX_KNOWN) origins.delete(origins.keys().next().value!)
      origins.set(key, value)
    }

    // An outcome stored only or announced at once is one statement: the outcome row and its event (the payload
    // once, and who gets it: the subscriptions matching now), all or nothing. It also reads the facts the route
    // was decided on, and writes nothing unless they are still `decidedOn` (the same snapshot: a connection
    // made since gets the push): then it answers the facts as they are (`same` false). Nothing is written
    // either when the call id was already accepted (`inserted` false).
    // An event for at most INLINE subscriptions is not stored apart: its deliveries are written in the statement
    // and render their body from the outcome when sent; they are leased to this process's delivery runner when
    // it set aside room for them all (handed over as a claim returns them: no notification, no claim), else
    // queued and the delivery runners woken. A larger one is an `events` row for the fan-out worker
    // (EventFanout), leased to this process's fan-out runner when it has room, else notified: the statement's
    // cost stays bounded however many subscriptions there are.
    // Migration 0020's function, planned once per session (as SQL text, PostgreSQL planned it on every call).
    const insertAnnounced = (
      row: typeof OutcomeRow.Type,
      kind: "lead" | "booking",
      key: string,
      decidedOn: Known,
      event: Fanout.EventRow | undefined,
      render: (deliveryId: string) => string
    ) =>
      Effect.suspend(() => {
        const known = origins.get(key)
        const lease = event === undefined || known === undefined
          ? undefined
          : Option.getOrUndefined(Option.flatMap(handoffs, (h) => h.reserve(Deliveries.table.table, known)))
        const eventLease = event === undefined || known !== undefined
          ? undefined
          : Option.getOrUndefined(Option.flatMap(handoffs, (h) => h.reserve(EventFanout.table.table, [""])))
        return sql<{
          same: boolean | null
          inserted: boolean
          facts: unknown
          deliveries: number | null
          event_handed: unknown
          handed: unknown
          origins: ReadonlyArray<string> | null
        }>`
          SELECT same, inserted, facts, deliveries, event_handed, handed, origins FROM call_outcome_intake_4(${row.callId},
            ${row.accountId}, ${row.tenantId}, ${row.classification}, ${row.body}::jsonb, ${row.route},
            ${row.reason}, ${kind}, ${decidedOn.json}::jsonb, ${event === undefined ? null : JSON.stringify(event)}::jsonb,
            ${INLINE}, ${notifier.channel(EventFanout.EVENTS_CHANNEL)}, ${eventLease?.owner ?? null},
            ${eventLease?.until ?? null}, ${notifier.channel(Fanout.DELIVERIES_CHANNEL)}, ${lease?.owner ?? null},
            ${lease?.until ?? null}, ${known?.length ?? 0})`.pipe(
          Effect.tap((rows) => {
            const result = rows[0]
            if (result?.inserted === true && result.deliveries !== null) rememberOrigins(key, result.origins)
          }),
          Effect.onExit((exit) => {
            const result = Exit.isSuccess(exit) ? exit.value[0] : undefined
            const settle = (reservation: typeof lease, handed: unknown) =>
              reservation === undefined
                ? Effect.void
                : Array.isArray(handed)
                ? reservation.adopt(handed)
                : reservation.cancel
            // Deliveries of the outcome's own event come back without their body (migration 0020): it is
            // rendered here from the event just built, as a claim renders it from the stored outcome.
            const handed = Array.isArray(result?.handed)
              ? result.handed.map((delivery: Record<string, unknown>) => ({ ...delivery, body: render(String(delivery["id"])) }))
              : result?.handed
            return Effect.zipRight(settle(eventLease, result?.event_handed), settle(lease, handed))
          }),
          Effect.orDie
        )
      })

    // The answer to an outcome whose call id was already accepted: the first acceptance, or a conflict.
    const acceptedBefore = (callId: string, body: string) =>
      Effect.gen(function*() {
        const previous = yield* Effect.orDie(existing({ callId, body }))
        if (Option.isNone(previous) || !previous.value.same_body) {
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
      })

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

    // Accepting is one statement when nothing is pushed and the account's facts are known from its last
    // outcome (two when they are not, or changed since); a short transaction when a push job is queued.
    const accept = Effect.fn("Outcomes.accept")(function*(callId: string, outcome: CallOutcome) {
      const event = eventOf(callId, outcome, withoutPush(outcome))
      const kind = Fanout.kindOf(event)
      if (!isUuid(outcome.account_id)) return yield* new UnknownAccount({ accountId: outcome.account_id })
      const key = `${outcome.account_id}\u0000${outcome.tenant_id}\u0000${kind}`
      const encoded = encodeOutcome(outcome)
      let cached = true
      let facts = Option.fromNullable(known.get(key))
      if (Option.isNone(facts)) {
        cached = false
        facts = yield* readFacts(outcome.account_id, outcome.tenant_id)
      }
      for (let decisions = 1;; decisions++) {
        if (decisions > MAX_DECISIONS) return yield* Effect.dieMessage("The account's routing facts kept changing while an outcome was accepted.")
        if (Option.isNone(facts)) {
          remember(key, facts)
          return yield* new UnknownAccount({ accountId: outcome.account_id })
        }
        const { classifications, connected, crm_push, mode } = facts.value.facts
        const rules: Routing.RoutingRules = crm_push === null || classifications === null
          ? Routing.DEFAULT_RULES
          : { crm_push, classifications }
        const route = Routing.decide(outcome, { mode, rules, connected: mode === "live" && rules.crm_push && connected })
        const row = {
          callId,
          accountId: outcome.account_id,
          tenantId: outcome.tenant_id,
          classification: outcome.classification,
          body: JSON.stringify(encoded),
          route: routeNames[route._tag],
          reason: route._tag === "Push" ? "A CRM push job was queued; the event follows when it ends." : route.reason
        }

        if (route._tag === "Push") {
          // A push is decided on facts read now, never on remembered ones.
          if (cached) {
            cached = false
            facts = yield* readFacts(outcome.account_id, outcome.tenant_id)
            continue
          }
          remember(key, facts)
          return yield* sql.withTransaction(
            Effect.gen(function*() {
              const inserted = yield* Effect.orDie(insert(row))
              if (Option.isNone(inserted)) return yield* acceptedBefore(callId, row.body)
              const jobId = yield* jobs.enqueue({ callId, accountId: outcome.account_id, tenantId: outcome.tenant_id })
              return { call_id: callId, duplicate: false, route: "push", reason: row.reason, push_job_id: jobId } satisfies Accepted
            })
          ).pipe(Effect.catchTag("SqlError", Effect.die))
        }
        const announced = route._tag === "EventOnly"
        const createdAt = new Date(yield* Clock.currentTimeMillis)
        const eventRow = announced ? Fanout.eventRow(event, randomUUID(), createdAt, yield* TraceContext.current) : undefined
        const [result] = yield* insertAnnounced(row, kind, key, facts.value, eventRow, (id) => Fanout.body(event, id, createdAt))
        if (result?.same !== true) {
          // The facts changed since they were read: decide again on the ones the statement saw.
          cached = false
          facts = yield* decodeFacts(result?.facts ?? null).pipe(Effect.orDie)
          continue
        }
        remember(key, facts)
        if (!result.inserted) return yield* acceptedBefore(callId, row.body)
        return {
          call_id: callId,
          duplicate: false,
          route: row.route,
          reason: row.reason,
          ...(announced ? { deliveries: result.deliveries ?? 0 } : {})
        } satisfies Accepted
      }
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
