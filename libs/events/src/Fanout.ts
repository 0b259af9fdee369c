/**
 * Event fan-out: a lead or booking event goes to every matching active
 * subscription of the account (`Subscriptions.matching`) (`lead` → lead|all, `booking`
 * → booking|all; duplicate subscriptions get duplicate deliveries; unknown
 * event values match nothing — Events rules 3 and 4).
 *
 * An event is one `events` row (store migration 0017): its payload once
 * (shared/DESIGN.md shapes, the contract's `LeadEvent` / `BookingEvent`,
 * without the `id`), the columns each delivery copies (the ones the
 * perform-list preview reads: call id, source, contact and appointment
 * external ids), and who gets it: the matching subscriptions at the time it
 * is written. Its deliveries (`event_fan_out`) have no payload of their own:
 * the body sent is the event's payload whose `id` is the delivery id — the
 * `webhook-id` a receiver de-duplicates on — one per (event, subscription),
 * however often the fan-out is redone.
 *
 * The outcome intake writes the event and leaves its deliveries to the
 * fan-out worker (`EventFanout`); `enqueue`, for a caller that is a worker
 * already (the push job that announces its call), fans out at once in the
 * caller's transaction.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Events } from "@crm-relay/contract"
import { Notifier } from "@crm-relay/store"
import * as Audit from "@crm-relay/store/Audit"
import * as TraceContext from "@crm-relay/store/TraceContext"
import { Clock, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Subscriptions } from "./Subscriptions.js"

/** The `source` of a test event sent from the Integrations area. */
export const TEST_SOURCE = "Test event from the Integrations area"

/** The channel the delivery worker listens on: the JobQueue channel of the `deliveries` table. */
export const DELIVERIES_CHANNEL = "jobs:deliveries"

/** An event to announce, before it has an id and a time. */
export interface EventInput {
  readonly accountId: string
  readonly callId: string
  readonly source: string
  readonly contact: Events.EventContact
  readonly jobType: string
  readonly summary: string
  /** Present: a booking event with this appointment; absent: a lead event. */
  readonly appointment: Option.Option<Events.EventAppointment>
}

/** The kind of event `input` is. */
export const kindOf = (input: EventInput): Events.EventKind => (Option.isSome(input.appointment) ? "booking" : "lead")

const toInstant = Schema.decodeSync(Events.LeadEvent.fields.created_at)
const encodeLead = Schema.encodeSync(Events.LeadEvent)
const encodeBooking = Schema.encodeSync(Events.BookingEvent)

/** The delivered payload of `input` under delivery id `id`, created at `createdAt`. */
export const payload = (input: EventInput, id: string, createdAt: Date): Events.DeliveredEvent => {
  const common = {
    id,
    call_id: input.callId,
    source: input.source,
    contact: input.contact,
    job_type: input.jobType,
    summary: input.summary,
    created_at: toInstant(createdAt.toISOString())
  }
  return Option.match(input.appointment, {
    onNone: (): Events.DeliveredEvent => ({ ...common, event: "lead", booked: false }),
    onSome: (appointment): Events.DeliveredEvent => ({
      ...common,
      event: "booking",
      // Preview rule: booked = the delivery has an external appointment id.
      booked: appointment.external_id !== "",
      appointment
    })
  })
}

const encode = (event: Events.DeliveredEvent): unknown => (event.event === "lead" ? encodeLead(event) : encodeBooking(event))

/** The JSON text a delivery of `input` sends under delivery id `id` (exactly the bytes signed), created at `createdAt`. */
export const body = (input: EventInput, id: string, createdAt: Date): string => JSON.stringify(encode(payload(input, id, createdAt)))

/**
 * The `events` row of `input` with id `id`, created at `createdAt`, continuing `traceparent` (its
 * payload as encoded JSON without the `id`, which each delivery's own id fills in when it is sent).
 */
export const eventRow = (input: EventInput, id: string, createdAt: Date, traceparent: string | null) => {
  const { id: _id, ...event } = encode(payload(input, "", createdAt)) as Record<string, unknown>
  return {
    id,
    account_id: input.accountId,
    kind: kindOf(input),
    call_id: input.callId,
    source: input.source,
    contact_external_id: input.contact.external_id,
    appointment_external_id: Option.match(input.appointment, {
      onNone: () => null,
      onSome: (a) => (a.external_id === "" ? null : a.external_id)
    }),
    created_at: createdAt,
    traceparent,
    payload: event
  }
}

/** The `events` row of an event (see `eventRow`). */
export type EventRow = ReturnType<typeof eventRow>

/**
 * A `deliveries` row that carries its own payload (encoded JSON, not yet text): what the intake of the
 * previous release writes through migration 0014/0015's functions, kept while such replicas may run.
 */
export interface DeliveryRow {
  readonly id: string
  readonly account_id: string
  readonly subscription_id: string
  readonly event: Events.EventKind
  readonly call_id: string
  readonly source: string
  readonly contact_external_id: string
  readonly appointment_external_id: string | null
  readonly target_url: string
  readonly payload: unknown
  readonly created_at: Date
  readonly next_attempt_at: Date
  readonly traceparent: string | null
}

/**
 * The delivery rows of `input` as the previous release wrote them, one per subscription of `matching`
 * (each its own id, the `webhook-id`, and its own payload), due at `createdAt`, continuing `traceparent`.
 */
export const deliveryRows = (
  input: EventInput,
  matching: ReadonlyArray<{ readonly id: string; readonly targetUrl: string }>,
  createdAt: Date,
  traceparent: string | null
): ReadonlyArray<DeliveryRow> => {
  const kind = kindOf(input)
  const appointmentId = Option.match(input.appointment, {
    onNone: () => null,
    onSome: (a) => (a.external_id === "" ? null : a.external_id)
  })
  return matching.map((subscription) => {
    const id = randomUUID()
    return {
      id,
      account_id: input.accountId,
      subscription_id: subscription.id,
      event: kind,
      call_id: input.callId,
      source: input.source,
      contact_external_id: input.contact.external_id,
      appointment_external_id: appointmentId,
      target_url: subscription.targetUrl,
      payload: encode(payload(input, id, createdAt)),
      created_at: createdAt,
      next_attempt_at: createdAt,
      traceparent
    }
  })
}

/** Inserts the deliveries of an event. */
export class Fanout extends Effect.Service<Fanout>()("@crm-relay/events/Fanout", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const notifier = yield* Notifier.Notifier
    const subscriptions = yield* Subscriptions

    return {
      /**
       * One delivery per matching active subscription, in the caller's
       * transaction (the event row and all its deliveries); answers the
       * delivery ids (none, and no event, when nothing matches).
       */
      enqueue: Effect.fn("Fanout.enqueue")(function*(input: EventInput) {
        const createdAt = new Date(yield* Clock.currentTimeMillis)
        // Each delivery's attempts continue the trace that announced the event.
        const row = eventRow(input, randomUUID(), createdAt, yield* TraceContext.current)
        const [fanned] = yield* sql<{ ids: ReadonlyArray<string> | null }>`SELECT event_fan_out_now(${JSON.stringify(row)}::jsonb,
          ${notifier.channel(DELIVERIES_CHANNEL)}) AS ids`.pipe(Effect.orDie)
        return (fanned?.ids ?? []).map(String)
      }),

      /**
       * A test event to one active subscription of the account, whatever event it
       * subscribed to: a lead-shaped sample (call id `test_…`), delivered, signed and
       * logged like any other, and marked `test` so the perform-list preview never
       * samples it. None when the subscription is not the account's active one.
       */
      test: Effect.fn("Fanout.test")(function*(accountId: string, subscriptionId: string) {
        const found = yield* subscriptions.find(accountId, subscriptionId)
        if (Option.isNone(found)) return Option.none<string>()
        const createdAt = new Date(yield* Clock.currentTimeMillis)
        const id = randomUUID()
        const input: EventInput = {
          accountId,
          callId: `test_${id.slice(0, 8)}`,
          source: TEST_SOURCE,
          contact: {
            external_id: "",
            full_name: "Test Caller",
            first_name: "Test",
            last_name: "Caller",
            phones: ["+15550100000"],
            emails: ["test.caller@example.com"],
            address: ""
          },
          jobType: "Test",
          summary: "A test event sent from the Integrations area.",
          appointment: Option.none()
        }
        const traceparent = yield* TraceContext.current
        yield* sql`INSERT INTO deliveries ${sql.insert({
          id,
          account_id: accountId,
          subscription_id: found.value.id,
          event: "lead",
          call_id: input.callId,
          source: input.source,
          contact_external_id: "",
          appointment_external_id: null,
          target_url: found.value.targetUrl,
          payload: JSON.stringify(encode(payload(input, id, createdAt))),
          created_at: createdAt,
          next_attempt_at: createdAt,
          traceparent,
          test: true
        })}`.pipe(Effect.orDie)
        yield* notifier.notify(DELIVERIES_CHANNEL, "lead").pipe(Effect.orDie)
        yield* Audit.record("delivery.test_sent", { account_id: accountId, subscription_id: subscriptionId, delivery_id: id })
        return Option.some(id)
      })
    }
  }),
  dependencies: [Subscriptions.Default]
}) {}
