/**
 * Issue 35, part 3: "payloads stored once per event rather than once per
 * delivery". The event an outcome announces at its intake is not stored
 * apart from the outcome (store migration 0020): its deliveries carry no
 * payload and no event row exists; the body each one sends is rendered from
 * the stored outcome, the same bytes on every attempt, the same bytes the
 * intake handed over, on a real database (PGlite, or PostgreSQL with
 * DATABASE_URL).
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Accounts, Deliveries, Preview } from "@crm-relay/events"
import { JobQueue } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Deferred, Duration, Effect, Either, Fiber, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Outcomes } from "../src/Outcomes/Outcomes.js"
import { connectedAccount, outcomeFor, PipelineLive } from "./OutcomesHarness.js"

/** Claims `id` alone (other tests' due deliveries are given back at once) and answers the job. */
const claimOnly = (id: string) =>
  Effect.gen(function*() {
    const queue = yield* JobQueue.make(Deliveries.table)
    const claimed = yield* queue.claim(100, Duration.millis(1))
    yield* queue.release(claimed.filter((j) => j.id !== id).map((j) => j.id))
    const job = claimed.find((j) => j.id === id)
    expect(job).toBeDefined()
    return job!
  })

const requestedBooking = {
  status: "requested",
  job_type: "Boiler service",
  start: "2026-12-01T09:00:00Z",
  end: "2026-12-01T10:00:00Z",
  timezone: "Europe/London",
  slot_text: "Tuesday 9–10am",
  title: "Boiler service for Grace Hopper",
  notes: "",
  address: "2 Compiler Road"
}

describe("an outcome's own event (#35)", () => {
  layer(PipelineLive, { excludeTestServices: true })((it) => {
    it.effect("#35 \"payloads stored once per event\": no event row and no payload per delivery; each attempt renders the same bytes from the outcome, the DESIGN.md lead shape with the delivery's id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outcomes = yield* Outcomes
        const deliveries = yield* Effect.provide(Deliveries.Deliveries, Deliveries.Deliveries.Default)
        // demo: no push, the event is announced at intake.
        const accountId = yield* connectedAccount("demo", false)
        const callId = `call-${randomUUID()}`
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ route: "event", deliveries: 1 })
        expect(yield* sql`SELECT id FROM events WHERE call_id = ${callId}`).toEqual([])
        const [row] = yield* sql<{ id: string; created_at: Date }>`SELECT id, created_at FROM deliveries
          WHERE call_id = ${callId} AND outcome_event AND payload IS NULL AND event_id IS NULL`
        expect(row).toBeDefined()
        // Nor what the outcome already has: the source, and the intake's trace context (kept once, on the outcome).
        const [outcomeRow] = yield* sql<{ traceparent: string | null }>`SELECT traceparent FROM call_outcomes WHERE call_id = ${callId}`
        expect(outcomeRow!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
        expect(yield* sql`SELECT source, traceparent FROM deliveries WHERE id = ${row!.id}`).toEqual([{ source: "", traceparent: null }])
        // The perform-list preview reads the source from the outcome.
        const preview = yield* Effect.provide(Preview.Preview, Preview.Preview.Default)
        const [record] = yield* preview.list(Schema.decodeSync(Accounts.AccountId)(accountId), 1)
        expect(record).toMatchObject({ id: row!.id, call_id: callId, source: "Receptionist (phone)" })

        const first = yield* claimOnly(row!.id)
        expect(first.data.body).toBe(null)
        // The claimed delivery continues the intake's trace.
        expect(first.traceparent).toBe(outcomeRow!.traceparent)
        const sent = Either.getOrThrow(Deliveries.bodyOf(first.id, first.data))!
        expect(JSON.parse(sent)).toEqual({
          id: row!.id,
          event: "lead",
          call_id: callId,
          source: "Receptionist (phone)",
          contact: {
            external_id: "",
            full_name: "Grace Hopper",
            first_name: "Grace",
            last_name: "Hopper",
            phones: ["+1 555 0199"],
            emails: ["grace@example.com"],
            address: "2 Compiler Road"
          },
          job_type: "Leak",
          summary: "Kitchen tap leaks",
          booked: false,
          created_at: row!.created_at.toISOString()
        })
        // The operator's view of the bytes is the same text.
        expect(Option.getOrNull(yield* deliveries.payload(row!.id))).toBe(sent)

        // Its lease ends (the worker died): attempt 2 sends exactly the same bytes (and so the same signature input).
        yield* sql`UPDATE deliveries SET lease_expires_at = now() - interval '1 second' WHERE id = ${row!.id}`
        const second = yield* claimOnly(row!.id)
        expect(second.attempt).toBe(2)
        expect(Either.getOrThrow(Deliveries.bodyOf(second.id, second.data))).toBe(sent)
        yield* (yield* JobQueue.make(Deliveries.table)).release([row!.id])
      }))

    it.effect("#35: a booking outcome's own event renders the booking shape (appointment requested, booked false) from the outcome", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outcomes = yield* Outcomes
        const accountId = yield* connectedAccount("demo", false)
        const callId = `call-${randomUUID()}`
        yield* outcomes.accept(callId, outcomeFor(accountId, { classification: "booking", booking: requestedBooking }))
        const [row] = yield* sql<{ id: string }>`SELECT id FROM deliveries WHERE call_id = ${callId} AND outcome_event`
        const job = yield* claimOnly(row!.id)
        const { notes: _notes, status: _status, ...appointment } = requestedBooking
        expect(JSON.parse(Either.getOrThrow(Deliveries.bodyOf(job.id, job.data))!)).toMatchObject({
          id: row!.id,
          event: "booking",
          booked: false,
          appointment: { ...appointment, external_id: "", status: "requested" }
        })
        yield* (yield* JobQueue.make(Deliveries.table)).release([row!.id])
      }))

    it.effect("#35: the same call id accepted twice at once is stored once: the second waits on the first's key and is answered as the repeat it is (one outcome, one delivery)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outcomes = yield* Outcomes
        const accountId = yield* connectedAccount("demo", false)
        const callId = `call-${randomUUID()}`
        const outcome = outcomeFor(accountId)
        if (process.env["DATABASE_URL"] !== undefined) {
          // PostgreSQL: the first acceptance is held uncommitted in a transaction of its own, so the second
          // passes the repeat check, then waits on the primary key, and fails on it once the first commits.
          const accepted = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holding = yield* sql.withTransaction(
            Effect.zipLeft(outcomes.accept(callId, outcome), Effect.zipRight(Deferred.succeed(accepted, void 0), Deferred.await(release)))
          ).pipe(Effect.fork)
          yield* Deferred.await(accepted)
          const second = yield* Effect.fork(outcomes.accept(callId, outcome))
          yield* Eventually.eventually(Effect.map(
            sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE '%call_outcome_intake_4%'`,
            (rows) => (rows[0]?.n ?? 0) > 0
          ), Duration.seconds(30))
          yield* Deferred.succeed(release, void 0)
          expect(yield* Fiber.join(holding)).toMatchObject({ duplicate: false })
          expect(yield* Fiber.join(second)).toMatchObject({ duplicate: true, route: "event", deliveries: 1 })
        } else {
          // PGlite serves one session: two statements never overlap, and the repeat is found by the check.
          expect(yield* outcomes.accept(callId, outcome)).toMatchObject({ duplicate: false })
          expect(yield* outcomes.accept(callId, outcome)).toMatchObject({ duplicate: true, route: "event", deliveries: 1 })
        }
        expect(yield* sql`SELECT count(*)::int AS n FROM call_outcomes WHERE call_id = ${callId}`).toEqual([{ n: 1 }])
        expect(yield* sql`SELECT count(*)::int AS n FROM deliveries WHERE call_id = ${callId}`).toEqual([{ n: 1 }])
      }))
  })
})
