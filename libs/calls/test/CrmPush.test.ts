/**
 * Outcome acceptance and the CRM push worker against the reference bridge
 * (real TLS, real egress) on a test database: routing, once per call id,
 * stored receipts not repeated, events fanned out once per call.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Deliveries, EventFanout, Fanout, Subscriptions } from "@crm-relay/events"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Schedules } from "@crm-relay/bridge"
import { JobHandoffs, JobQueue, Notifier } from "@crm-relay/store"
import { Eventually, ListenProbe } from "@crm-relay/testing"
import { Clock, Duration, Effect, Either, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import { randomUUID } from "node:crypto"
import { Connections } from "../src/Connections.js"
import { CrmPushJobs } from "../src/CrmPush/Jobs.js"
import { CrmPushReceipts } from "../src/CrmPush/Receipts.js"
import * as CrmPushWorker from "../src/CrmPush/Worker.js"
import { INLINE, Outcomes } from "../src/Outcomes/Outcomes.js"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { Routing } from "../src/Routing.js"
import { settings, TENANT } from "./ConnectionsHarness.js"
import { connectedAccount, outcomeFor, PipelineLive, PipelineWithPostCallRetry, subscribe } from "./OutcomesHarness.js"

const deliveriesOf = (callId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ event: string; contact_external_id: string; payload: { contact: { external_id: string } } }>`
      SELECT event, contact_external_id, ${sql.literal(Deliveries.bodySql)}::jsonb AS payload FROM deliveries WHERE call_id = ${callId}`)

/** Runs the worker until the job of `callId` is no longer pending. */
const pushUntilSettled = (callId: string) =>
  Effect.gen(function*() {
    const connections = yield* Connections
    const lookup: CrmPushWorker.ConnectionLookup = (a, t) =>
      Effect.map(connections.find(a, t), Option.map((s) => ({ connection: s.connection, capabilities: Option.some(s.capabilities.operations) })))
    const jobs = yield* CrmPushJobs
    yield* Effect.forkScoped(CrmPushWorker.run(lookup, { pollInterval: Duration.millis(50) }))
    // A bound against a hang, never a measure of speed.
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Eventually.HANG_BOUND)
    while (true) {
      const job = yield* jobs.findByCall(callId)
      if (Option.isSome(job) && job.value.status !== "pending") return job.value
      if ((yield* Clock.currentTimeMillis) > deadline) return yield* Effect.dieMessage("the push did not settle")
      yield* Effect.sleep(Duration.millis(50))
    }
  }).pipe(Effect.scoped)

describe("outcomes and the CRM push", () => {
  layer(PipelineLive, { excludeTestServices: true })((it) => {
    it.effect("a live, connected lead: push queued in the acceptance transaction; the worker upserts, creates the lead, fans out once", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        const accepted = yield* (yield* Outcomes).accept(callId, outcomeFor(accountId))
        expect(accepted).toMatchObject({ route: "push", duplicate: false })
        expect(yield* deliveriesOf(callId)).toEqual([])
        const job = yield* pushUntilSettled(callId)
        expect(job.status).toBe("succeeded")
        const contact = (yield* bridge.control.records).contacts.find((c) => c.contact.call_id === callId)!
        const deliveries = yield* deliveriesOf(callId)
        expect(deliveries).toHaveLength(1)
        expect(deliveries[0]).toMatchObject({ event: "lead", contact_external_id: contact.id, payload: { contact: { external_id: contact.id } } })
      }))

    it.effect("a re-run does not repeat a step whose receipt is stored (upsert sent once; the lead with the same key)", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        yield* bridge.control.setFault(Faults.status(503), { operation: "leads.create", times: 2 })
        yield* (yield* Outcomes).accept(callId, outcomeFor(accountId))
        const job = yield* pushUntilSettled(callId)
        expect(job).toMatchObject({ status: "succeeded", attempts: 3 })
        const sent = (yield* bridge.control.received).filter((r) => JSON.stringify(r.body).includes(callId))
        expect(sent.map((r) => r.operation)).toEqual(["contacts.upsert", "leads.create", "leads.create", "leads.create"])
        expect(new Set(sent.filter((r) => r.operation === "leads.create").map((r) => r.idempotencyKey)).size).toBe(1)
        const steps = yield* (yield* CrmPushReceipts).list(job.id)
        expect(steps.map((s) => [s.operation, s.idempotency_key])).toEqual([
          ["contacts.upsert", sent[0]!.idempotencyKey],
          ["leads.create", sent[1]!.idempotencyKey]
        ])
      }))

    it.effect("receipts come back in step order even when stored in the same instant (one transaction, one now())", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const callId = `call-${randomUUID()}`
        yield* (yield* Outcomes).accept(callId, outcomeFor(yield* connectedAccount()))
        const job = Option.getOrThrow(yield* (yield* CrmPushJobs).findByCall(callId))
        const receipts = yield* CrmPushReceipts
        const key = (n: number) => String(n).repeat(64)
        const steps = [
          { operation: "contacts.upsert", idempotency_key: key(1), outcome: "receipt", receipt: { id: "c-1", is_new: true } },
          { operation: "appointments.create", idempotency_key: key(2), outcome: "refused", receipt: { error: "Conflict", status: 409 } },
          { operation: "leads.create", idempotency_key: key(3), outcome: "receipt", receipt: { id: "l-1" } }
        ] as const
        yield* sql.withTransaction(Effect.forEach(steps, (step) => receipts.put(job.id, step)))
        expect(yield* receipts.list(job.id)).toEqual(steps)
      }))

    it.effect("replay: a stopped job is pending again with a fresh record (no error class, first attempt or finish; one more replay), its receipts kept; a pending one is left as it is", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const jobs = yield* CrmPushJobs
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        yield* bridge.control.setFault(Faults.status(409), { operation: "leads.create" })
        yield* (yield* Outcomes).accept(callId, outcomeFor(accountId))
        const stopped = yield* pushUntilSettled(callId)
        expect(stopped).toMatchObject({ status: "failed", error_class: "Conflict", replays: 0 })
        expect(stopped.finished_at).not.toBeNull()
        expect(yield* jobs.replay(stopped.id)).toBe("queued")
        const replayed = Option.getOrThrow(yield* jobs.find(stopped.id))
        expect(replayed).toMatchObject({ status: "pending", attempts: 0, error_class: null, finished_at: null, replays: 1 })
        expect(replayed.receipts.map((r) => r.operation)).toEqual(stopped.receipts.map((r) => r.operation))
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ first_attempt_at: Date | null }>`SELECT first_attempt_at FROM crm_push_jobs WHERE id = ${stopped.id}`
        expect(row!.first_attempt_at).toBeNull()
        expect(yield* jobs.replay(stopped.id)).toBe("already_pending")
        expect(Option.getOrThrow(yield* jobs.find(stopped.id)).replays).toBe(1)
        expect(yield* jobs.replay("not-a-uuid")).toBe("not_found")
        expect(yield* pushUntilSettled(callId)).toMatchObject({ status: "succeeded", replays: 1 })
      }))

    it.effect("replay: a succeeded job is left as it is unless forced; a replay keeps the attempts of earlier runs", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const jobs = yield* CrmPushJobs
        const callId = `call-${randomUUID()}`
        yield* bridge.control.setFault(Faults.status(409), { operation: "leads.create", times: 1 })
        yield* (yield* Outcomes).accept(callId, outcomeFor(yield* connectedAccount()))
        const stopped = yield* pushUntilSettled(callId)
        expect(stopped).toMatchObject({ status: "failed", previous_attempts: 0 })
        expect(yield* jobs.replay(stopped.id)).toBe("queued")
        expect(Option.getOrThrow(yield* jobs.find(stopped.id))).toMatchObject({ attempts: 0, previous_attempts: stopped.attempts })
        const succeeded = yield* pushUntilSettled(callId)
        expect(succeeded).toMatchObject({ status: "succeeded", replays: 1 })
        expect(yield* jobs.replay(stopped.id)).toBe("completed")
        expect(Option.getOrThrow(yield* jobs.find(stopped.id))).toMatchObject({ status: "succeeded", attempts: succeeded.attempts, replays: 1 })
        expect(yield* jobs.replay(stopped.id, { force: true })).toBe("queued")
        expect(Option.getOrThrow(yield* jobs.find(stopped.id))).toMatchObject({
          status: "pending",
          attempts: 0,
          previous_attempts: stopped.attempts + succeeded.attempts,
          replays: 2
        })
      }))

    it.effect("a requested booking the bridge refuses (409, or 400) stores why with the key it sent, and the lead carries the request", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const accountId = yield* connectedAccount()
        const booking = {
          status: "requested",
          start: "2031-03-03T09:00:00-05:00",
          end: "2031-03-03T10:00:00-05:00",
          timezone: "America/New_York",
          slot_text: "Monday at nine",
          title: "Leak repair",
          notes: "",
          address: "2 Compiler Road",
          job_type: "Leak"
        }
        const cases = [
          [409, { error: "Conflict", status: 409 }],
          [400, { error: "Permanent", kind: "rejected", status: 400 }]
        ] as const
        for (const [status, why] of cases) {
          const callId = `call-${randomUUID()}`
          yield* bridge.control.setFault(Faults.status(status), { operation: "appointments.create" })
          yield* (yield* Outcomes).accept(callId, outcomeFor(accountId, { classification: "booking", booking }))
          const job = yield* pushUntilSettled(callId)
          expect(job.status).toBe("succeeded")
          const sent = (yield* bridge.control.received).filter((r) => JSON.stringify(r.body).includes(callId) || r.operation === "appointments.create")
          const keyOf = (operation: string) => sent.filter((r) => r.operation === operation).at(-1)!.idempotencyKey
          expect(job.receipts.map((r) => [r.operation, r.outcome, r.idempotency_key])).toEqual([
            ["contacts.upsert", "receipt", keyOf("contacts.upsert")],
            ["appointments.create", "refused", keyOf("appointments.create")],
            ["leads.create", "receipt", keyOf("leads.create")]
          ])
          expect(job.receipts[1]!.receipt).toMatchObject(why)
          const lead = (yield* bridge.control.records).leads.find((l) => l.lead.call_id === callId)!
          expect(lead.lead.notes).toContain("Requested appointment: Monday at nine")
        }
      }))

    it.effect("Serialization rule 2: \"A field marked Optional is omitted when absent. It is never sent as null.\" — an outcome with an empty postal_code and an empty service_id is accepted, and the push sends neither (\"Omitted when empty\"): the upsert and the requested booking are made", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        const booking = {
          status: "requested",
          start: "2031-03-04T09:00:00-05:00",
          end: "2031-03-04T10:00:00-05:00",
          timezone: "America/New_York",
          slot_text: "Tuesday at nine",
          title: "Leak repair",
          notes: "",
          address: "2 Compiler Road",
          job_type: "Leak",
          service_id: ""
        }
        const caller = {
          full_name: "Grace Hopper",
          first_name: "Grace",
          last_name: "Hopper",
          phones: ["+1 555 0199"],
          emails: ["grace@example.com"],
          address: "2 Compiler Road",
          postal_code: ""
        }
        yield* (yield* Outcomes).accept(callId, outcomeFor(accountId, { classification: "booking", booking, caller }))
        const job = yield* pushUntilSettled(callId)
        expect(job.status).toBe("succeeded")
        expect(job.receipts.map((r) => [r.operation, r.outcome])).toEqual([["contacts.upsert", "receipt"], ["appointments.create", "receipt"]])
        const sent = (yield* bridge.control.received).filter((r) =>
          JSON.stringify(r.body).includes(callId) || JSON.stringify(r.body).includes("Tuesday at nine")
        )
        expect(sent.map((r) => [r.operation, r.status])).toEqual([["contacts.upsert", 200], ["appointments.create", 200]])
        expect(JSON.stringify(sent[0]!.body)).not.toContain("postal_code")
        expect(JSON.stringify(sent[1]!.body)).not.toContain("service_id")
        const [delivery] = yield* deliveriesOf(callId)
        expect(delivery).toMatchObject({ event: "booking" })
        expect(JSON.stringify(delivery!.payload)).not.toContain("postal_code")
      }))

    it.effect("routing: demo → event at once; no connection → event at once; spam → stored only; rules can narrow classifications", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const demo = yield* connectedAccount("demo", false)
        const unconnected = yield* connectedAccount("live", false)
        const live = yield* connectedAccount()
        const route = (accountId: string, extra: Record<string, unknown> = {}) =>
          Effect.map(outcomes.accept(`call-${randomUUID()}`, outcomeFor(accountId, extra)), (a) => [a.route, a.reason])
        expect(yield* route(demo)).toEqual(["event", "A demo account never reaches a real CRM."])
        expect(yield* route(unconnected)).toEqual(["event", "Tenant t-1 has no bridge connection."])
        expect(yield* route(live, { classification: "spam" })).toEqual(["store", "Calls classified spam are stored and produce nothing."])
        yield* (yield* Routing).set(live, { classifications: ["booking"] })
        expect((yield* route(live))[0]).toBe("store")
        yield* (yield* Routing).set(live, { classifications: ["lead", "spam"] })
        expect((yield* route(live, { classification: "spam" }))[0]).toBe("store")
      }))

    it.effect("intake: once an account's facts are known, an outcome announced at once is one statement; a subscription or a bridge connection added since is seen by the next outcome", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const accountId = yield* connectedAccount("live", false)
        const accept = () => outcomes.accept(`call-${randomUUID()}`, outcomeFor(accountId))
        expect(yield* accept()).toMatchObject({ route: "event", deliveries: 1 })
        let statements = 0
        const second = yield* accept().pipe(Statement.withTransformer((statement) =>
          Effect.sync(() => {
            statements++
            return statement
          })
        ))
        expect(second).toMatchObject({ route: "event", deliveries: 1 })
        expect(statements).toBe(1)
        yield* subscribe(accountId, "lead")
        const third = yield* accept()
        expect(third).toMatchObject({ route: "event", deliveries: 2 })
        yield* EventFanout.drain()
        expect(yield* deliveriesOf(third.call_id)).toHaveLength(2)
        yield* (yield* Connections).set(accountId, TENANT.tenantId, settings(bridge, { transport: "rest", auth: "api_key" }))
        expect((yield* accept()).route).toBe("push")
      }))

    it.effect("intake hand-off (#13, #35): an outcome whose event goes to at most INLINE subscriptions is fanned out in its intake, its deliveries inserted leased to this process's delivery runner as attempt 1 and handed over with the claim's columns, nothing notified; a duplicate gives the room back; without room they are queued unleased and the delivery runners notified", () =>
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const notifier = yield* Notifier.Notifier
        const handoffs = yield* Effect.provide(JobHandoffs.JobHandoffs, JobHandoffs.JobHandoffs.Default)
        const until = new Date(Date.now() + 30_000)
        const asked: Array<[string, ReadonlyArray<string>]> = []
        const adopted: Array<[string, ReadonlyArray<unknown>]> = []
        const cancelled: Array<string> = []
        let room = true
        const runner = (table: string) =>
          handoffs.register(table, (keys) => {
            asked.push([table, keys])
            return room
              ? Option.some({
                owner: `${table}-runner-here`,
                until,
                adopt: (rows) => Effect.sync(() => adopted.push([table, rows])),
                cancel: Effect.sync(() => cancelled.push(table))
              })
              : Option.none()
          })
        yield* runner(EventFanout.table.table)
        yield* runner(Deliveries.table.table)
        const outcomes = yield* Effect.provide(Outcomes, Outcomes.Default.pipe(Layer.provide(Layer.succeed(JobHandoffs.JobHandoffs, handoffs))))
        const accountId = yield* connectedAccount("live", false)
        const [subscription] = yield* sql<{ target_url: string }>`SELECT target_url FROM subscriptions WHERE account_id = ${accountId}`
        const origin = Deliveries.originOf(subscription!.target_url)
        const listen = (channel: string) =>
          Effect.gen(function*() {
            const probe = ListenProbe.make()
            const heard = yield* probe.tap(notifier.listen(channel)).pipe(
              Stream.filter((payload) => payload !== "probe"),
              Stream.runHead,
              Effect.fork
            )
            yield* probe.hears(notifier.notify(channel, "probe"))
            return heard
          })

        // The first outcome of the account here: its receiver origins are not known yet, so no room can be asked
        // of the delivery runner; the event is finished in the intake all the same, its delivery queued unleased
        // and the delivery runners notified at COMMIT.
        const heardFirst = yield* listen(Fanout.DELIVERIES_CHANNEL)
        const first = `call-${randomUUID()}`
        expect(yield* outcomes.accept(first, outcomeFor(accountId))).toMatchObject({ route: "event", deliveries: 1 })
        // Issue 35, "payloads stored once per event": the event is not stored apart from the outcome (migration
        // 0020); its delivery renders its body from the outcome.
        expect(yield* sql`SELECT status FROM events WHERE call_id = ${first}`).toEqual([])
        expect(yield* sql`SELECT attempts, lease_owner, outcome_event, event_id, payload FROM deliveries WHERE call_id = ${first}`)
          .toEqual([{ attempts: 0, lease_owner: null, outcome_event: true, event_id: null, payload: null }])
        expect(yield* Fiber.join(heardFirst)).toEqual(Option.some("lead"))
        expect(asked).toEqual([[EventFanout.table.table, [""]]])
        expect(cancelled).toEqual([EventFanout.table.table])

        // From the next one on: room for the origin it learnt, the delivery leased to the runner here as attempt 1
        // and handed over as a claim returns it (the deliveries table's select list).
        const callId = `call-${randomUUID()}`
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ route: "event", deliveries: 1 })
        expect(asked[1]).toEqual([Deliveries.table.table, [origin]])
        const [row] = yield* sql<Record<string, unknown>>`SELECT id, attempts, ${sql.literal(Deliveries.table.select)},
            ${sql.literal(Deliveries.table.traceparent)} AS traceparent, target_origin AS job_fair_key, lease_owner, lease_expires_at, event_id
          FROM deliveries WHERE call_id = ${callId}`
        expect(row).toMatchObject({ attempts: 1, lease_owner: `${Deliveries.table.table}-runner-here` })
        expect(new Date(row!["lease_expires_at"] as string).getTime()).toBe(until.getTime())
        expect(row!["event_id"]).toBe(null)
        const { event_id: _event, lease_expires_at: _end, lease_owner: _owner, ...claimed } = row!
        // Handed with its body rendered by the intake: the very bytes a claim renders from the stored outcome.
        const rendered = Either.getOrThrow(Deliveries.sentBody(row!["id"] as string, claimed))
        expect(JSON.parse(rendered!)).toMatchObject({ id: row!["id"], event: "lead", call_id: callId })
        expect(adopted).toEqual([[Deliveries.table.table, [{ ...claimed, body: rendered, outcome: null }]]])
        expect(Either.isRight(Deliveries.table.decode(adopted[0]![1][0]))).toBe(true)
        expect(cancelled).toEqual([EventFanout.table.table])
        // At least once: were this process killed, its lease ends and another runner claims the delivery, same id.
        yield* sql`UPDATE deliveries SET lease_expires_at = now() - interval '1 second' WHERE id = ${row!["id"] as string}`
        const other = yield* JobQueue.make(Deliveries.table)
        const again = yield* other.claim(100, Duration.seconds(30))
        yield* other.release(again.filter((j) => j.id !== row!["id"]).map((j) => j.id))
        expect(again.filter((j) => j.id === row!["id"]).map((j) => j.attempt)).toEqual([2])
        yield* other.release([row!["id"] as string])

        // The same call id again: nothing inserted, the room given back.
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ duplicate: true })
        expect(cancelled).toEqual([EventFanout.table.table, Deliveries.table.table])
        expect(adopted).toHaveLength(1)

        // No room: queued unleased (any runner's claim) and the delivery runners notified at COMMIT.
        room = false
        const heard = yield* listen(Fanout.DELIVERIES_CHANNEL)
        const queued = `call-${randomUUID()}`
        yield* outcomes.accept(queued, outcomeFor(accountId))
        expect(yield* sql`SELECT attempts, lease_owner FROM deliveries WHERE call_id = ${queued}`).toEqual([{ attempts: 0, lease_owner: null }])
        expect(yield* Fiber.join(heard)).toEqual(Option.some("lead"))
        expect(adopted).toHaveLength(1)
      })))

    it.effect("intake hand-off (#35): an event for more than INLINE subscriptions is left to the fan-out runner (pending, no delivery written by the intake), leased to this process's fan-out runner when it has room", () =>
      Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const handoffs = yield* Effect.provide(JobHandoffs.JobHandoffs, JobHandoffs.JobHandoffs.Default)
        const until = new Date(Date.now() + 30_000)
        const adopted: Array<ReadonlyArray<unknown>> = []
        yield* handoffs.register(EventFanout.table.table, () =>
          Option.some({
            owner: "fan-out-here",
            until,
            adopt: (rows) => Effect.sync(() => adopted.push(rows)),
            cancel: Effect.void
          }))
        const outcomes = yield* Effect.provide(Outcomes, Outcomes.Default.pipe(Layer.provide(Layer.succeed(JobHandoffs.JobHandoffs, handoffs))))
        const accountId = yield* connectedAccount("live", false)
        for (let i = 0; i < INLINE; i++) yield* subscribe(accountId, "lead")
        const callId = `call-${randomUUID()}`
        expect(yield* outcomes.accept(callId, outcomeFor(accountId))).toMatchObject({ route: "event", deliveries: INLINE + 1 })
        expect(yield* deliveriesOf(callId)).toEqual([])
        expect(yield* sql`SELECT status, attempts, lease_owner FROM events WHERE call_id = ${callId}`)
          .toEqual([{ status: "pending", attempts: 1, lease_owner: "fan-out-here" }])
        expect(adopted).toHaveLength(1)
        yield* sql`UPDATE events SET lease_owner = NULL, lease_expires_at = NULL WHERE call_id = ${callId}`
        yield* EventFanout.drain()
        expect(yield* deliveriesOf(callId)).toHaveLength(INLINE + 1)
      })))

    it.effect("intake: the intake function (migration 0014) answers and writes what the former statement did: facts unchanged, facts changed in between (nothing written, the facts as they are answered), a call id accepted before, an unknown account, an outcome stored only", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const notifier = yield* Notifier.Notifier
        const channel = notifier.channel(Fanout.DELIVERIES_CHANNEL)
        const accountId = yield* connectedAccount("live", false)
        const kind = "lead" as const
        // The facts as the former statement read them (Subscriptions.receiving), and as the function reads them.
        const formerFacts = (account: string) =>
          sql`(SELECT jsonb_build_object(
                'mode', a.mode, 'crm_push', rules.crm_push, 'classifications', rules.classifications,
                'connected', EXISTS (SELECT 1 FROM connections AS c WHERE c.account_id = a.id AND c.tenant_id = ${TENANT.tenantId}),
                'subscriptions', (SELECT COALESCE(jsonb_agg(jsonb_build_object('id', s.id, 'targetUrl', s.target_url) ORDER BY s.seq), '[]'::jsonb)
                  FROM subscriptions AS s WHERE s.account_id = a.id AND ${Subscriptions.receiving(sql, kind)}))
              FROM accounts AS a LEFT JOIN routing_rules AS rules ON rules.account_id = a.id
              WHERE a.id = ${account})`
        const factsNow = (account: string) =>
          Effect.gen(function*() {
            const [former] = yield* sql<{ facts: unknown }>`SELECT ${formerFacts(account)} AS facts`
            const [now] = yield* sql<{ facts: unknown }>`SELECT call_outcome_facts(${account}, ${TENANT.tenantId}, ${kind}) AS facts`
            expect(now!.facts).toEqual(former!.facts)
            return JSON.stringify(now!.facts)
          })
        interface Intake {
          readonly callId: string
          readonly accountId: string
          readonly decidedOn: string
          readonly announced: boolean
        }
        const args = (i: Intake) =>
          Effect.gen(function*() {
            const outcome = outcomeFor(i.accountId)
            const encoded = Schema.encodeSync(CallOutcome)(outcome)
            const decidedOn = JSON.parse(i.decidedOn) as { subscriptions: ReadonlyArray<{ id: string; targetUrl: string }> } | null
            const event: Fanout.EventInput = {
              accountId: i.accountId,
              callId: i.callId,
              source: outcome.source,
              contact: { external_id: "", full_name: "Grace Hopper", first_name: "Grace", last_name: "Hopper", phones: [], emails: [], address: "" },
              jobType: "Leak",
              summary: "Kitchen tap leaks",
              appointment: Option.none()
            }
            const deliveries = i.announced && decidedOn !== null
              ? Fanout.deliveryRows(event, decidedOn.subscriptions, new Date(yield* Clock.currentTimeMillis), null)
              : []
            return {
              ...i,
              body: JSON.stringify(encoded),
              digest: "d1",
              route: i.announced ? "event" : "store",
              reason: "Why it went this way.",
              deliveries
            }
          })
        // The statement of the intake before migration 0014, kept here as the reference the function must match.
        const viaStatement = (i: Intake) =>
          Effect.flatMap(args(i), (r) =>
            sql<Record<string, unknown>>`
              WITH facts AS (
                SELECT ${formerFacts(r.accountId)} AS current
              ), guard AS (
                SELECT current = ${r.decidedOn}::jsonb AS same, current FROM facts
              ), outcome AS (
                INSERT INTO call_outcomes (call_id, account_id, tenant_id, classification, body, body_digest, route, route_reason,
                  event_kind, event_deliveries, event_fanned_out_at)
                SELECT ${r.callId}::text, ${r.accountId}::uuid, ${TENANT.tenantId}::text, 'lead'::text, ${r.body}::jsonb,
                  ${r.digest}::text, ${r.route}::text, ${r.reason}::text, ${r.announced ? kind : null}::text,
                  ${r.announced ? r.deliveries.length : null}::int, CASE WHEN ${r.announced}::boolean THEN now() END
                FROM guard WHERE guard.same
                ON CONFLICT (call_id) DO NOTHING
                RETURNING call_id
              ), queued AS (
                INSERT INTO deliveries (id, account_id, subscription_id, event, call_id, source, contact_external_id,
                  appointment_external_id, target_url, payload, created_at, next_attempt_at, traceparent)
                SELECT id, account_id, subscription_id, event, call_id, source, contact_external_id,
                  appointment_external_id, target_url, payload, created_at, next_attempt_at, traceparent
                FROM jsonb_populate_recordset(NULL::deliveries, ${JSON.stringify(r.deliveries)}::jsonb)
                WHERE EXISTS (SELECT 1 FROM outcome)
                RETURNING id
              )
              SELECT guard.same, EXISTS (SELECT 1 FROM outcome) AS inserted,
                CASE WHEN guard.same THEN NULL ELSE guard.current END AS facts,
                (SELECT pg_notify(${channel}, ${kind})::text FROM queued LIMIT 1) IS NOT NULL AS notified
              FROM guard`)
        const viaFunction = (i: Intake) =>
          Effect.flatMap(args(i), (r) =>
            sql<Record<string, unknown>>`SELECT same, inserted, facts, notified FROM call_outcome_intake(${r.callId}, ${r.accountId},
              ${TENANT.tenantId}, 'lead', ${r.body}::jsonb, ${r.digest}, ${r.route}, ${r.reason}, ${kind}, ${r.announced},
              ${r.decidedOn}::jsonb, ${JSON.stringify(r.deliveries)}::jsonb, ${channel})`)
        // What an intake left in the database, without what differs by nature (call ids, delivery ids, times).
        const written = (callId: string) =>
          Effect.gen(function*() {
            const outcomes = yield* sql<Record<string, unknown>>`SELECT account_id, tenant_id, classification, body, body_digest, route,
                route_reason, event_kind, event_deliveries, event_fanned_out_at IS NOT NULL AS fanned_out
              FROM call_outcomes WHERE call_id = ${callId}`
            const deliveries = yield* sql<Record<string, unknown>>`SELECT account_id, subscription_id, event, source, target_url,
                status, attempts, payload->'contact' AS contact FROM deliveries WHERE call_id = ${callId} ORDER BY seq`
            return { outcomes, deliveries }
          })
        // Each case both ways, each way with its own call id; the answers and what was written must be the same.
        const both = (i: Omit<Intake, "callId">, callIds?: { readonly statement: string; readonly fn: string }) =>
          Effect.gen(function*() {
            const ids = callIds ?? { statement: `call-${randomUUID()}`, fn: `call-${randomUUID()}` }
            const [former] = yield* viaStatement({ ...i, callId: ids.statement })
            const [now] = yield* viaFunction({ ...i, callId: ids.fn })
            expect(now).toEqual(former)
            const writtenNow = yield* written(ids.fn)
            expect(writtenNow).toEqual(yield* written(ids.statement))
            return { answer: now!, written: writtenNow, ids }
          })

        const decided = yield* factsNow(accountId)
        const fresh = yield* both({ accountId, decidedOn: decided, announced: true })
        expect(fresh.answer).toEqual({ same: true, inserted: true, facts: null, notified: true })
        expect(fresh.written.outcomes).toMatchObject([{ route: "event", event_kind: "lead", event_deliveries: 1, fanned_out: true }])
        expect(fresh.written.deliveries).toMatchObject([{ event: "lead", target_url: "https://hooks.example.com/all", status: "pending" }])

        // The same call ids again: nothing written, nothing notified.
        const again = yield* both({ accountId, decidedOn: decided, announced: true }, fresh.ids)
        expect(again.answer).toEqual({ same: true, inserted: false, facts: null, notified: false })
        expect(again.written.deliveries).toHaveLength(1)

        const stored = yield* both({ accountId, decidedOn: decided, announced: false })
        expect(stored.answer).toEqual({ same: true, inserted: true, facts: null, notified: false })
        expect(stored.written.outcomes).toMatchObject([{ route: "store", event_kind: null, event_deliveries: null, fanned_out: false }])
        expect(stored.written.deliveries).toEqual([])

        // The facts change between the decision and the write: a lead subscription, then a bridge connection.
        yield* subscribe(accountId, "lead")
        const withSubscription = yield* factsNow(accountId)
        const stale = yield* both({ accountId, decidedOn: decided, announced: true })
        expect(stale.answer).toMatchObject({ same: false, inserted: false, notified: false })
        expect(stale.answer["facts"]).toEqual(JSON.parse(withSubscription))
        expect(stale.written).toEqual({ outcomes: [], deliveries: [] })
        const bridge = yield* ReferenceBridge.ReferenceBridge
        yield* (yield* Connections).set(accountId, TENANT.tenantId, settings(bridge, { transport: "rest", auth: "api_key" }))
        const connected = yield* both({ accountId, decidedOn: withSubscription, announced: true })
        expect(connected.answer).toMatchObject({ same: false, inserted: false, facts: { connected: true } })
        expect(connected.written).toEqual({ outcomes: [], deliveries: [] })

        // No such account: no facts, nothing written.
        const unknown = randomUUID()
        expect(yield* factsNow(unknown)).toBe("null")
        const nobody = yield* both({ accountId: unknown, decidedOn: decided, announced: true })
        expect(nobody.answer).toEqual({ same: null, inserted: false, facts: null, notified: false })
        expect(nobody.written).toEqual({ outcomes: [], deliveries: [] })
      }))

    it.effect("once per call id: the same body is a duplicate (nothing new queued), a different body a conflict", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        const first = yield* outcomes.accept(callId, outcomeFor(accountId))
        const again = yield* outcomes.accept(callId, outcomeFor(accountId))
        expect(again).toEqual({ ...first, duplicate: true })
        const conflict = yield* Effect.flip(outcomes.accept(callId, outcomeFor(accountId, { tags: [] })))
        expect(conflict._tag).toBe("OutcomeConflict")
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`SELECT id FROM crm_push_jobs WHERE call_id = ${callId}`).toHaveLength(1)
      }))
  })

  layer(PipelineWithPostCallRetry, { timeout: Duration.seconds(120) })((it) => {
    it.effect("A captured lead is never lost: a requested booking whose appointments.create answers 503 until the retry schedule (postCallRetry) ends is given up like a 409 — the lead carrying the request is written and the booking event says requested", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const sql = yield* SqlClient.SqlClient
        const connections = yield* Connections
        const accountId = yield* connectedAccount()
        const callId = `call-${randomUUID()}`
        const booking = {
          status: "requested",
          start: "2031-03-05T09:00:00-05:00",
          end: "2031-03-05T10:00:00-05:00",
          timezone: "America/New_York",
          slot_text: "Wednesday at nine",
          title: "Leak repair",
          notes: "Side door",
          address: "2 Compiler Road",
          job_type: "Leak"
        }
        yield* bridge.control.setFault(Faults.status(503), { operation: "appointments.create", times: "always" })
        yield* (yield* Outcomes).accept(callId, outcomeFor(accountId, { classification: "booking", booking }))
        // The job is due from the database's now(): start the TestClock just after the real time.
        yield* TestClock.setTime(Date.now() + 1000)
        const lookup: CrmPushWorker.ConnectionLookup = (a, t) =>
          Effect.map(connections.find(a, t), Option.map((c) => ({ connection: c.connection, capabilities: Option.some(c.capabilities.operations) })))
        yield* Effect.forkScoped(CrmPushWorker.run(lookup, { pollInterval: Duration.hours(1) }))
        // Each run ends with the job waiting for a later time (then the clock is moved there) or finished.
        const waiting = sql<{ status: string; next_attempt_at: Date }>`SELECT status, next_attempt_at FROM crm_push_jobs
          WHERE call_id = ${callId} AND lease_owner IS NULL`
        for (let run = 0; run < 40; run++) {
          let job: { status: string; next_attempt_at: Date } | undefined
          yield* Eventually.eventually(
            Effect.gen(function*() {
              const now = yield* TestClock.currentTimeMillis
              ;[job] = (yield* Effect.orDie(waiting)).filter((j) => j.status !== "pending" || j.next_attempt_at.getTime() > now)
              return job !== undefined
            }),
            Duration.seconds(60)
          )
          if (job!.status !== "pending") break
          yield* TestClock.setTime(job!.next_attempt_at.getTime())
        }
        const job = Option.getOrThrow(yield* (yield* CrmPushJobs).findByCall(callId))
        expect(job.status).toBe("succeeded")
        expect(job.receipts.map((r) => [r.operation, r.outcome])).toEqual([
          ["contacts.upsert", "receipt"],
          ["appointments.create", "refused"],
          ["leads.create", "receipt"]
        ])
        expect(job.receipts[1]!.receipt).toMatchObject({ error: "Transient", status: 503 })
        // The booking was tried through the whole schedule (10 retries), with one key, and never confirmed.
        const bookings = (yield* bridge.control.received).filter((r) => r.operation === "appointments.create" && JSON.stringify(r.body).includes("Wednesday at nine"))
        expect(bookings.map((r) => r.status)).toEqual(Array(Schedules.POST_CALL_MAX_RETRIES + 1).fill(503))
        expect(new Set(bookings.map((r) => r.idempotencyKey))).toEqual(new Set([job.receipts[1]!.idempotency_key]))
        const lead = (yield* bridge.control.records).leads.find((l) => l.lead.call_id === callId)!
        expect(lead.lead.notes).toContain("Requested appointment: Wednesday at nine")
        const deliveries = yield* sql<{ event: string; payload: { appointment: { status: string; external_id: string } } }>`
          SELECT event, ${sql.literal(Deliveries.bodySql)}::jsonb AS payload FROM deliveries WHERE call_id = ${callId}`
        expect(deliveries.map((d) => [d.event, d.payload.appointment.status, d.payload.appointment.external_id])).toEqual([
          ["booking", "requested", ""]
        ])
      }).pipe(Effect.scoped), 300_000)
  })
})
