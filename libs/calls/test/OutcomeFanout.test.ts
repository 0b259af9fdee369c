/**
 * Issue 35: accepting an outcome writes the outcome and its event; the
 * deliveries are the fan-out's, in batches (above INLINE subscriptions: at
 * or below it the intake writes them itself, see CrmPush.test.ts), on a real database (PGlite, or
 * PostgreSQL with DATABASE_URL). The fan-out is held back deterministically:
 * no runner runs in these tests until they fan out themselves.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Accounts, EventFanout, Fanout, Subscriptions } from "@crm-relay/events"
import { JobQueue, Notifier } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Duration, Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { INLINE, Outcomes } from "../src/Outcomes/Outcomes.js"
import { connectedAccount, outcomeFor, PipelineLive, subscribe } from "./OutcomesHarness.js"

/** The subscriptions of an account, oldest first. */
const subscriptionsOf = (accountId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string }>`SELECT id FROM subscriptions WHERE account_id = ${accountId} ORDER BY seq`.pipe(
      Effect.map((rows) => rows.map((r) => r.id)),
      Effect.orDie
    ))

/** The deliveries of a call: id and subscription, in insertion order. */
const deliveriesOf = (callId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string; subscription_id: string }>`SELECT id, subscription_id FROM deliveries WHERE call_id = ${callId} ORDER BY seq`.pipe(
      Effect.orDie
    ))

describe("outcome fan-out (#35)", () => {
  layer(PipelineLive, { excludeTestServices: true })((it) => {
    it.effect("#35: \"A subscription that exists when the outcome is accepted gets the event, one created afterwards does not, and one removed between intake and fan-out gets nothing.\"", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const subscriptions = yield* Subscriptions.Subscriptions
        const accountId = yield* connectedAccount("live", false)
        // More than the intake writes itself: the deliveries are the fan-out's.
        for (let i = 0; i <= INLINE; i++) yield* subscribe(accountId, "lead")
        const existing = yield* subscriptionsOf(accountId)
        const kept = existing.slice(0, -1)
        const removedLater = existing[existing.length - 1]
        const callId = `call-${randomUUID()}`
        // Accepted: the outcome and its event only; the subscriptions that exist now are who gets it.
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ route: "event", deliveries: INLINE + 2 })
        expect(yield* deliveriesOf(callId)).toEqual([])
        // Between intake and fan-out: one subscription created, one removed.
        yield* subscribe(accountId, "all")
        expect(yield* subscriptions.remove(Schema.decodeSync(Accounts.AccountId)(accountId), removedLater!)).toBe(true)
        yield* EventFanout.drain()
        expect((yield* deliveriesOf(callId)).map((d) => d.subscription_id)).toEqual(kept)
        // The next outcome goes to the subscriptions that exist when it is accepted.
        const next = `call-${randomUUID()}`
        expect(yield* outcomes.accept(next, outcomeFor(accountId))).toMatchObject({ deliveries: INLINE + 2 })
        yield* EventFanout.drain()
        const created = (yield* subscriptionsOf(accountId)).at(-1)!
        expect((yield* deliveriesOf(next)).map((d) => d.subscription_id)).toEqual([...kept, created])
      }))

    it.effect("#35: \"at-least-once, one `webhook-id` per (event, subscription) across retries and crashes\": a fan-out in batches whose worker dies after its first batch is taken over from its cursor, and a batch done again adds no second id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const notifier = yield* Notifier.Notifier
        const outcomes = yield* Outcomes
        const accountId = yield* connectedAccount("live", false)
        for (let i = 0; i < INLINE + 6; i++) yield* subscribe(accountId, "lead")
        const all = yield* subscriptionsOf(accountId)
        expect(all).toHaveLength(INLINE + 7)
        const callId = `call-${randomUUID()}`
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ deliveries: INLINE + 7 })
        const [event] = yield* sql<{ id: string }>`SELECT id FROM events WHERE call_id = ${callId}`

        // A worker claims the event with a short lease, fans out one batch of 3, and dies (no result stored).
        const dying = yield* JobQueue.make(EventFanout.table)
        // Other tests' events may be due too: the others are given back at once.
        const claimed = yield* dying.claim(100, Duration.millis(1))
        expect(claimed.map((j) => j.id)).toContain(event!.id)
        yield* dying.release(claimed.filter((j) => j.id !== event!.id).map((j) => j.id))
        const [first] = yield* sql<{ ids: ReadonlyArray<string>; more: boolean; held: boolean }>`SELECT ids, more, held
          FROM event_fan_out(${event!.id}, ${dying.owner}, 3, ${notifier.channel(Fanout.DELIVERIES_CHANNEL)})`
        expect(first).toMatchObject({ more: true, held: true })
        expect(first!.ids).toHaveLength(3)
        const [cursor] = yield* sql<{ fanout_after: string | number; status: string }>`SELECT fanout_after, status FROM events WHERE id = ${event!.id}`
        expect(cursor!.status).toBe("pending")

        // Its lease ends; another worker claims the event and goes on from the cursor, in batches of 2.
        const status = sql<{ status: string }>`SELECT status FROM events WHERE id = ${event!.id}`.pipe(Effect.orDie)
        yield* Eventually.eventually(Effect.zipRight(EventFanout.drain(2), Effect.map(status, (rows) => rows[0]?.status === "done")))
        const delivered = yield* deliveriesOf(callId)
        expect(delivered.map((d) => d.subscription_id)).toEqual(all)
        expect(new Set(delivered.map((d) => d.id)).size).toBe(INLINE + 7)
        // The first batch's ids are the ones its receivers get: not made again.
        expect(delivered.slice(0, 3).map((d) => d.id).sort()).toEqual([...first!.ids].sort())
        // The dead worker's lease is gone: what it would still write is refused.
        const [late] = yield* sql<{ held: boolean }>`SELECT held FROM event_fan_out(${event!.id}, ${dying.owner}, 3, NULL)`
        expect(late!.held).toBe(false)
        // The whole fan-out done again (no lease): every pair has its delivery already, nothing is added.
        const [again] = yield* sql<{ ids: ReadonlyArray<string> }>`SELECT ids FROM event_fan_out(${event!.id}, NULL, NULL, NULL)`
        expect(again!.ids).toEqual([])
        expect(yield* deliveriesOf(callId)).toEqual(delivered)
      }))

    it.effect("#35 part 3: \"fewer commits per delivery\": the fan-out's last batch finishes its event in the same statement, so the runner stores nothing more; an earlier, full batch leaves it pending", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outcomes = yield* Outcomes
        const accountId = yield* connectedAccount("live", false)
        for (let i = 0; i < INLINE; i++) yield* subscribe(accountId, "lead")
        const callId = `call-${randomUUID()}`
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ deliveries: INLINE + 1 })
        const [event] = yield* sql<{ id: string }>`SELECT id FROM events WHERE call_id = ${callId}`
        const state = sql<{ status: string; lease_owner: string | null }>`SELECT status, lease_owner FROM events WHERE id = ${event!.id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

        const worker = yield* JobQueue.make(EventFanout.table)
        // Other tests' events may be due too: the others are given back at once.
        const claimed = yield* worker.claim(100, Duration.seconds(30))
        yield* worker.release(claimed.filter((j) => j.id !== event!.id).map((j) => j.id))
        const [first] = yield* sql<{ ids: ReadonlyArray<string>; more: boolean; finished: boolean }>`SELECT ids, more, finished
          FROM event_fan_out_2(${event!.id}, ${worker.owner}, ${INLINE}, NULL)`
        expect(first).toMatchObject({ more: true, finished: false })
        expect(yield* state).toEqual({ status: "pending", lease_owner: worker.owner })

        // The handler's last batch (the last subscription) finishes the event under the lease.
        const handle = yield* EventFanout.makeHandler(worker.owner, INLINE)
        const result = yield* handle(claimed.find((j) => j.id === event!.id)!)
        expect(result).toMatchObject({ _tag: "Complete", stored: true })
        expect(yield* state).toEqual({ status: "done", lease_owner: null })
        expect(yield* deliveriesOf(callId)).toHaveLength(INLINE + 1)
        // Done: a late batch of the same owner is refused, and adds nothing.
        const [late] = yield* sql<{ held: boolean; finished: boolean }>`SELECT held, finished FROM event_fan_out_2(${event!.id}, ${worker.owner}, 1, NULL)`
        expect(late).toMatchObject({ held: false, finished: false })
        expect(yield* deliveriesOf(callId)).toHaveLength(INLINE + 1)
      }))
  })
})
