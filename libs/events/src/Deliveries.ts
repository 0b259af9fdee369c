/**
 * Webhook deliveries as a job queue and as the operator sees them.
 *
 * The `deliveries` table (migration 0001; rows written by `Fanout`) is a
 * `JobQueue` table: `pending` → `delivered`, or `failed` (refused target,
 * removed subscription, or the retry schedule ended), or `ended` with an
 * `end_reason` (SubscriptionLifecycle: the receiver is gone, asked to abort
 * the message, or the subscription is disabled). `attempts` counts the
 * attempts of the current run; a replay queues the same row (same id, so
 * the same `webhook-id`) again with a fresh count. Every attempt is written
 * in the same statement that stores its outcome: the one that finishes the
 * delivery on the row itself (migration 0022, `internal/finalAttempt.ts`),
 * the others (retries, a worker that lost its lease, earlier runs) as rows
 * of `delivery_attempts` (migration 0004).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { JobQueue } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import { isUuid } from "@crm-relay/store/Ids"
import { Effect, Either, Option, type ParseResult, Schema } from "effect"
import * as Announcement from "./Announcement.js"
import * as OriginHealth from "./OriginHealth.js"
import * as Origin from "./internal/origin.js"
import { DELIVERIES_CHANNEL } from "./Fanout.js"
import { clampLimit, DEFAULT_PAGE, MAX_PAGE, UnknownCursor } from "./Page.js"
import { AttemptResult, DeliveryStatus } from "@crm-relay/contract/Deliveries"
import { attemptsOf, finalAttempt, lastAttemptColumns, lastAttemptJoin } from "./internal/finalAttempt.js"
import { claimedStateSql } from "./SubscriptionLifecycle.js"

/** Described in the contract, where the internal API takes it. */
export { AttemptResult, DeliveryStatus }


/** What the worker reads with each claimed delivery. */
export const DeliveryJob = Schema.Struct({
  account_id: Schema.String,
  target_url: Schema.String,
  /** The stored payload as JSON text: exactly the bytes sent and signed; null for an outcome's own event (`outcome`). */
  body: Schema.NullOr(Schema.String),
  /** For a delivery of the event its call's outcome announced at intake (store migration 0020): what renders its body. */
  outcome: Schema.NullOr(Schema.Struct({ call_id: Schema.String, created_at: Schema.Date, body: Schema.Unknown })),
  /** True when the subscription was removed since the fan-out (null: none recorded). */
  subscription_removed: Schema.NullOr(Schema.Boolean),
  subscription_id: Schema.NullOr(Schema.String),
  /** The subscription's state at the claim (SubscriptionLifecycle.ClaimedState; null: none recorded). */
  subscription_state: Schema.NullOr(Schema.Literal("active", "failing", "removed", "gone", "disabled")),
  /** The destination the subscription delivers to (Destinations; migration 0016); null for a REST hook. */
  destination_id: Schema.NullOr(Schema.String),
  /** Attempts made while its origin was held (OriginHealth): the retry schedule steps over them. */
  held_attempts: Schema.Int,
  /** Its origin at the claim (OriginHealth): this delivery is the held origin's probe, or a streak of failures is under way. */
  origin_state: Schema.NullOr(OriginHealth.ClaimedOriginState)
})
export type DeliveryJob = typeof DeliveryJob.Type

/**
 * The JSON text a delivery sends (exactly the bytes signed), over a row of `deliveries`: its own payload
 * when it carries one (written before store migration 0017, or a test event), else its event's payload
 * with the delivery's id (`jsonb`'s text form either way); NULL once retention dropped it.
 */
export const bodySql = `COALESCE(deliveries.payload::text,
      (SELECT (e.payload || jsonb_build_object('id', deliveries.id))::text FROM events AS e WHERE e.id = deliveries.event_id))`

/**
 * What renders the body of a delivery of the event its call's outcome announced at intake (store migration
 * 0020, `Announcement.renderBody`), over a row of `deliveries`: the call id, the delivery's `created_at` and the
 * outcome's body; NULL for any other delivery (its body is `bodySql`).
 */
export const outcomeSql = `(SELECT jsonb_build_object('call_id', o.call_id, 'created_at', deliveries.created_at, 'body', o.body)
      FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id)`

/**
 * Whether retention dropped the payload a delivery sends (see `bodySql`), over a row of `deliveries`. An
 * outcome's own event is never dropped: it is rendered from the outcome, which retention keeps.
 */
export const payloadDroppedSql = `(deliveries.payload IS NULL AND NOT deliveries.outcome_event AND (deliveries.event_id IS NULL OR
      (SELECT e.payload IS NULL FROM events AS e WHERE e.id = deliveries.event_id) IS NOT FALSE))`

const BodySource = Schema.Struct({ body: DeliveryJob.fields.body, outcome: DeliveryJob.fields.outcome })
const decodeSource = Schema.decodeUnknownEither(BodySource)

/**
 * The JSON text delivery `id` sends (exactly the bytes signed), from its claimed `body` and `outcome`: its
 * stored body, or its outcome's event rendered; null when retention dropped the payload. Left when the stored
 * outcome does not decode.
 */
export const bodyOf = (
  id: string,
  source: typeof BodySource.Type
): Either.Either<string | null, ParseResult.ParseError> =>
  source.body !== null || source.outcome === null
    ? Either.right(source.body)
    : Announcement.renderBody(source.outcome.call_id, source.outcome.body, id, source.outcome.created_at)

/** `bodyOf` over a row as read from the database (`bodySql` AS body, `outcomeSql` AS outcome). */
export const sentBody = (id: string, row: unknown): Either.Either<string | null, ParseResult.ParseError> =>
  Either.flatMap(decodeSource(row), (source) => bodyOf(id, source))

/** The deliveries table as a job queue (woken on Fanout's channel). */
export const table = JobQueue.table({
  table: "deliveries",
  completedStatus: "delivered",
  channel: DELIVERIES_CHANNEL,
  row: DeliveryJob,
  traced: true,
  // One receiver origin holds a bounded share of a worker's slots; accounts take turns.
  fairness: { key: "target_origin", group: "account_id", heldUntil: OriginHealth.heldUntilSql },
  log: "delivery_attempts",
  // Migration 0020 (0016's with `outcome`; 0011's with destination_id; its body read as `bodySql` since 0017):
  // the fair claim with the select list below, planned once per session. A change of the select list needs a
  // new version of the function (the Deliveries test compares the two claims).
  claimFunction: "deliveries_claim_fairly_4",
  // Migration 0022: the worker's results (delivered_at, end_reason, the final attempt on the row and the
  // other attempts as rows), planned once per session.
  finishFunction: { name: "deliveries_finish_3", columns: ["delivered_at", "end_reason", "held_attempts"] },
  // Kept as a `delivery_attempts` row when the delivery is replayed.
  finalAttempt,
  // An outcome's own event continues the trace of its outcome's intake, kept once on the outcome (migration 0020).
  traceparent: `COALESCE(traceparent,
    (SELECT o.traceparent FROM call_outcomes AS o WHERE deliveries.outcome_event AND o.call_id = deliveries.call_id))`,
  select: `account_id, target_url, ${bodySql} AS body, ${outcomeSql} AS outcome,
    (SELECT s.removed_at IS NOT NULL FROM subscriptions AS s WHERE s.id = deliveries.subscription_id) AS subscription_removed,
    subscription_id, ${claimedStateSql} AS subscription_state,
    (SELECT s.destination_id FROM subscriptions AS s WHERE s.id = deliveries.subscription_id) AS destination_id,
    held_attempts, ${OriginHealth.claimedStateSql} AS origin_state`
})

/**
 * The fairness key of a delivery to `targetUrl`: its origin, as the table's generated `target_origin`
 * column computes it (migration 0008), for room asked of a runner before the row exists (JobHandoffs).
 */
export const originOf = Origin.originOf

/** One logged attempt. */
export const Attempt = Schema.Struct({
  attempt: Schema.Int,
  started_at: Schema.DateFromSelf,
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error_class: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  result: AttemptResult
})
export type Attempt = typeof Attempt.Type

/** A delivery for the operator. */
export const Delivery = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  event: Schema.String,
  call_id: Schema.String,
  subscription_id: Schema.NullOr(Schema.String),
  target_url: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Int,
  last_error: Schema.NullOr(Schema.String),
  /** Why an `ended` delivery ended: gone, aborted or disabled. */
  end_reason: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.DateFromSelf,
  created_at: Schema.DateFromSelf,
  delivered_at: Schema.NullOr(Schema.DateFromSelf),
  last_attempt_at: Schema.NullOr(Schema.DateFromSelf),
  last_status_code: Schema.NullOr(Schema.Int),
  last_error_class: Schema.NullOr(Schema.String),
  last_duration_ms: Schema.NullOr(Schema.Int),
  /** A test event sent from the Integrations area. */
  test: Schema.Boolean,
  /** While pending behind its held origin (OriginHealth): since when the origin has been failing. */
  held_since: Schema.NullOr(Schema.DateFromSelf),
  /** While held: when its origin is probed next (or the running probe ends). */
  held_next_try_at: Schema.NullOr(Schema.DateFromSelf)
})
export type Delivery = typeof Delivery.Type

/** A page of an account's deliveries, latest first. */
export interface DeliveryPage {
  readonly deliveries: ReadonlyArray<Delivery>
  /** Pass as `cursor` for the next (older) page; none on the last page. */
  readonly nextCursor: Option.Option<string>
}

/** The cursor is not a delivery of the listing. */
export { UnknownCursor } from "./Page.js"

/** Default and largest page sizes of the listing. */
export { DEFAULT_PAGE, MAX_PAGE }

/** A page from `limit + 1` rows fetched: the extra row only says that another page follows. */
const pageOf = (rows: ReadonlyArray<Delivery>, limit: number): DeliveryPage => {
  const page = rows.slice(0, limit)
  return { deliveries: page, nextCursor: rows.length > limit ? Option.some(page[page.length - 1]!.id) : Option.none() }
}

/**
 * Why a delivery is not sent again when replayed: its subscription was
 * removed (by its owner, or after its receiver answered 410 Gone) or is
 * disabled. Its worker would end it again at once, sending nothing.
 */
export type Unsendable = "subscription_removed" | "subscription_gone" | "subscription_disabled"

/** What a replay of a delivery did (`Unsendable`: refused, nothing changed). */
export type ReplayOutcome = JobQueue.ReplayOutcome | Unsendable

/** The sentence of each refusal, the same on every surface (internal API, CLI, Integrations area). */
export const notReplayable: Record<Unsendable, string> = {
  subscription_removed:
    "This delivery's subscription was removed, so a replay would send nothing. The receiver must subscribe again; new events go to its new subscription.",
  subscription_gone:
    "This delivery's subscription was removed after its receiver answered 410 Gone, so a replay would send nothing. The receiver must subscribe again; new events go to its new subscription.",
  subscription_disabled:
    "This delivery's subscription is disabled, so a replay would send nothing. Enable the subscription first, then replay the delivery (or recover its deliveries)."
}

/** Whether `outcome` is a refusal (see `Unsendable`). */
export const isUnsendable = (outcome: ReplayOutcome): outcome is Unsendable => outcome in notReplayable

const unsendableState = (state: string | null): Unsendable | undefined =>
  state === "removed"
    ? "subscription_removed"
    : state === "gone"
    ? "subscription_gone"
    : state === "disabled"
    ? "subscription_disabled"
    : undefined

/** Longest error text kept in an attempt row. */
export const MAX_ATTEMPT_ERROR = 500

/** The row of one attempt, to insert in the transaction that stores its outcome. */
export interface AttemptRecord extends Attempt {
  readonly delivery_id: string
}

/**
 * The statement logging `record` (an INSERT, so it can run alongside the
 * delivery's state change in one statement: see JobQueue's FinishExtras).
 */
export const attemptStatement = (sql: SqlClient.SqlClient, record: AttemptRecord): Statement.Statement<never> => {
  const error = record.error === null ? null : record.error.slice(0, MAX_ATTEMPT_ERROR)
  return sql<never>`INSERT INTO delivery_attempts
    (delivery_id, attempt, started_at, status_code, duration_ms, error_class, error, result)
    VALUES (${record.delivery_id}, ${record.attempt}, ${record.started_at}, ${record.status_code},
      ${record.duration_ms}, ${record.error_class}, ${error}, ${record.result})`
}

/** `record` as a row of `delivery_attempts`, for `JobQueue` to insert with the outcome (`FinishExtras.log`). */
export const attemptRow = (record: AttemptRecord): Readonly<Record<string, unknown>> => ({
  ...record,
  error: record.error === null ? null : record.error.slice(0, MAX_ATTEMPT_ERROR)
})

/** Logs `record` on its own (tests, tools); the worker logs attempts with `attemptStatement`. */
export const recordAttempt = (record: AttemptRecord): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => attemptStatement(sql, record)).pipe(Effect.asVoid)


/** Lists, inspects and replays deliveries. */
export class Deliveries extends Effect.Service<Deliveries>()("@crm-relay/events/Deliveries", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* JobQueue.controls(table)
    const decodeDeliveries = Schema.decodeUnknown(Schema.Array(Delivery))
    const decodeAttempts = Schema.decodeUnknown(Schema.Array(Attempt))

    const columns = sql`d.id, d.account_id, d.event, d.call_id, d.subscription_id, d.target_url, d.status, d.attempts, d.last_error, d.end_reason,
      d.next_attempt_at, d.created_at, d.delivered_at, d.test, ${sql.literal(lastAttemptColumns)},
      h.failing_since AS held_since, GREATEST(h.next_probe_at, h.probe_until) AS held_next_try_at`
    const lastAttempt = sql.literal(`${lastAttemptJoin} ${OriginHealth.heldJoin}`)

    // The state of the delivery's subscription (SubscriptionLifecycle.ClaimedState; null: none recorded); none: no such delivery.
    const subscriptionState = (id: string) =>
      sql<{ state: string | null }>`SELECT ${sql.literal(claimedStateSql)} AS state FROM deliveries WHERE id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.state)),
        Effect.orDie
      )

    return {
      /**
       * Why a replay of the delivery would be refused (see `Unsendable`), if
       * it would; none as well for an unknown id.
       */
      notReplayable: Effect.fn("Deliveries.notReplayable")(function*(id: string) {
        if (!isUuid(id)) return Option.none<Unsendable>()
        const state = yield* subscriptionState(id)
        return Option.flatMap(state, (value) => Option.fromNullable(unsendableState(value)))
      }),

      /**
       * A page of the account's deliveries, latest first: `limit` (clamped to
       * 1..MAX_PAGE) after the delivery `cursor` when given.
       */
      list: Effect.fn("Deliveries.list")(function*(
        accountId: string,
        options: {
          readonly limit?: number | undefined
          readonly cursor?: string | undefined
          /** Only deliveries in this state (the Integrations area's filter). */
          readonly status?: DeliveryStatus | undefined
          /** Only deliveries of this event kind. */
          readonly event?: string | undefined
          /** Only deliveries to this subscription (a destination's latest, in the Integrations area). */
          readonly subscriptionId?: string | undefined
        } = {}
      ) {
        const limit = clampLimit(options.limit)
        if (!isUuid(accountId)) return { deliveries: [], nextCursor: Option.none() } satisfies DeliveryPage
        const cursor = options.cursor
        if (cursor !== undefined) {
          const known = isUuid(cursor)
            ? yield* sql`SELECT 1 FROM deliveries WHERE id = ${cursor} AND account_id = ${accountId}`.pipe(Effect.orDie)
            : []
          if (known.length === 0) return yield* new UnknownCursor({ cursor })
        }
        const after = cursor === undefined
          ? sql``
          : sql`AND (d.created_at, d.seq) < (SELECT c.created_at, c.seq FROM deliveries AS c WHERE c.id = ${cursor})`
        const rows = yield* sql`SELECT ${columns} FROM deliveries AS d ${lastAttempt}
          WHERE d.account_id = ${accountId} ${after}
            ${options.status === undefined ? sql`` : sql`AND d.status = ${options.status}`}
            ${options.event === undefined ? sql`` : sql`AND d.event = ${options.event}`}
            ${options.subscriptionId === undefined ? sql`` : sql`AND d.subscription_id = ${options.subscriptionId}`}
          ORDER BY d.created_at DESC, d.seq DESC
          LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeDeliveries), Effect.orDie)
        return pageOf(rows, limit)
      }),

      /**
       * A page of deliveries in `statuses` across all accounts (or of
       * `accountId`), created at or after `since` when given, latest first:
       * what the operator watches and replays.
       */
      search: Effect.fn("Deliveries.search")(function*(options: {
        readonly statuses: ReadonlyArray<DeliveryStatus>
        readonly accountId?: string | undefined
        readonly since?: Date | undefined
        readonly limit?: number | undefined
        readonly cursor?: string | undefined
      }) {
        const limit = clampLimit(options.limit)
        const { accountId, cursor, since } = options
        if ((accountId !== undefined && !isUuid(accountId)) || options.statuses.length === 0) {
          return { deliveries: [], nextCursor: Option.none() } satisfies DeliveryPage
        }
        if (cursor !== undefined) {
          const known = isUuid(cursor) ? yield* sql`SELECT 1 FROM deliveries WHERE id = ${cursor}`.pipe(Effect.orDie) : []
          if (known.length === 0) return yield* new UnknownCursor({ cursor })
        }
        // The statuses as literals (each checked against the closed list): the planner then proves the
        // failed-and-ended index's predicate (migration 0018), which a parameter would not let it do.
        const statuses = DeliveryStatus.literals.filter((s) => options.statuses.includes(s)).map((s) => `'${s}'`).join(", ")
        const rows = yield* sql`SELECT ${columns} FROM deliveries AS d ${lastAttempt}
          WHERE d.status IN (${sql.literal(statuses)})
            ${accountId === undefined ? sql`` : sql`AND d.account_id = ${accountId}`}
            ${since === undefined ? sql`` : sql`AND d.created_at >= ${since}`}
            ${cursor === undefined ? sql`` : sql`AND d.seq < (SELECT c.seq FROM deliveries AS c WHERE c.id = ${cursor})`}
          ORDER BY d.seq DESC
          LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeDeliveries), Effect.orDie)
        return pageOf(rows, limit)
      }),

      /** The JSON text a delivery sends (exactly the bytes signed), if it exists. */
      payload: Effect.fn("Deliveries.payload")(function*(id: string) {
        if (!isUuid(id)) return Option.none<string>()
        const rows = yield* sql`SELECT ${sql.literal(bodySql)} AS body, ${sql.literal(outcomeSql)} AS outcome
          FROM deliveries WHERE id = ${id}`.pipe(Effect.orDie)
        if (rows[0] === undefined) return Option.none<string>()
        return Option.fromNullable(Either.getOrNull(sentBody(id, rows[0])))
      }),

      /** One delivery with every attempt (oldest first). */
      find: Effect.fn("Deliveries.find")(function*(id: string) {
        if (!isUuid(id)) return Option.none()
        const rows = yield* sql`SELECT ${columns} FROM deliveries AS d ${lastAttempt} WHERE d.id = ${id}`.pipe(
          Effect.flatMap(decodeDeliveries),
          Effect.orDie
        )
        const delivery = rows[0]
        if (delivery === undefined) return Option.none()
        const attempts = yield* attemptsOf(sql, id).pipe(Effect.flatMap(decodeAttempts), Effect.orDie)
        return Option.some({ delivery, attempts })
      }),

      /**
       * Queues a delivered, failed or ended delivery again (same id, so the same
       * `webhook-id`), due now with a fresh attempt count. A delivery whose
       * subscription was removed or is disabled is refused (`Unsendable`): the
       * worker would end it again without sending anything.
       */
      replay: Effect.fn("Deliveries.replay")(function*(id: string) {
        if (!isUuid(id)) return "not_found" as const
        const state = yield* subscriptionState(id)
        if (Option.isNone(state)) return "not_found" as const
        const unsendable = unsendableState(state.value)
        // A subscription removed after this check: the worker ends the delivery unsent, as any of a removed one.
        if (unsendable !== undefined) return unsendable
        // An ended delivery sent again is no longer ended for its old reason.
        const outcome = yield* queue.replay(id, { assignments: sql`end_reason = NULL` })
        if (outcome === "queued") yield* Audit.record("delivery.replayed", { delivery_id: id })
        return outcome
      })
    }
  })
}) {}
