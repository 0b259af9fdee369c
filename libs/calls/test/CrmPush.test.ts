/**
 * Outcome acceptance and the CRM push worker against the reference bridge
 * (real TLS, real egress) on a test database: routing, once per call id,
 * stored receipts not repeated, events fanned out once per call.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { Accounts, Fanout, IntegrationKeys, Subscriptions } from "@crm-relay/events"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Schedules } from "@crm-relay/bridge"
import { Eventually } from "@crm-relay/testing"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema, TestClock } from "effect"
import { randomUUID } from "node:crypto"
import { Connections } from "../src/Connections.js"
import { CrmPushJobs } from "../src/CrmPush/Jobs.js"
import { CrmPushReceipts } from "../src/CrmPush/Receipts.js"
import { CrmPushRetry } from "../src/CrmPush/Retry.js"
import * as CrmPushWorker from "../src/CrmPush/Worker.js"
import { Outcomes } from "../src/Outcomes/Outcomes.js"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { Routing } from "../src/Routing.js"
import { ConnectionsLive, settings, TENANT } from "./ConnectionsHarness.js"

/** The pipeline with the real retry schedule (`Schedules.postCallRetry`). */
const PipelineWithPostCallRetry = Outcomes.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(
    Routing.Default,
    CrmPushJobs.Default,
    CrmPushReceipts.Default,
    Fanout.Fanout.Default,
    Subscriptions.Subscriptions.Default,
    IntegrationKeys.IntegrationKeys.Default
  )),
  Layer.provideMerge(ConnectionsLive)
)

/** The pipeline with a short retry schedule, on the real clock. */
const PipelineLive = PipelineWithPostCallRetry.pipe(
  Layer.provideMerge(Layer.succeed(CrmPushRetry, {
    schedule: Schedule.spaced(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(3)))
  }))
)

const decode = Schema.decodeUnknownSync(CallOutcome)

const outcomeFor = (accountId: string, extra: Record<string, unknown> = {}) =>
  decode({
    account_id: accountId,
    tenant_id: TENANT.tenantId,
    classification: "lead",
    source: "Receptionist (phone)",
    tags: ["inbound"],
    caller: {
      full_name: "Grace Hopper",
      first_name: "Grace",
      last_name: "Hopper",
      phones: ["+1 555 0199"],
      emails: ["grace@example.com"],
      address: "2 Compiler Road"
    },
    lead: { job_type: "Leak", summary: "Kitchen tap leaks", notes: "", urgency: "" },
    ...extra
  })

/** A live account with tenant t-1 connected over REST with its API key, and one `all` subscription. */
const connectedAccount = (mode: "live" | "demo" = "live", connect = true) =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.ReferenceBridge
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: string }>`INSERT INTO accounts (name, mode) VALUES ('Push test', ${mode}) RETURNING id`
    const accountId = row!.id
    if (connect) yield* (yield* Connections).set(accountId, TENANT.tenantId, settings(bridge, { transport: "rest", auth: "api_key" }))
    const key = yield* (yield* IntegrationKeys.IntegrationKeys).create(accountId)
    yield* (yield* Subscriptions.Subscriptions).create({
      accountId: Schema.decodeSync(Accounts.AccountId)(accountId),
      keyId: key.id,
      targetUrl: "https://hooks.example.com/all",
      event: "all"
    })
    return accountId
  })

const deliveriesOf = (callId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ event: string; contact_external_id: string; payload: { contact: { external_id: string } } }>`
      SELECT event, contact_external_id, payload FROM deliveries WHERE call_id = ${callId}`)

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
        const key = yield* (yield* IntegrationKeys.IntegrationKeys).create(accountId)
        yield* (yield* Subscriptions.Subscriptions).create({
          accountId: Schema.decodeSync(Accounts.AccountId)(accountId),
          keyId: key.id,
          targetUrl: "https://hooks.example.com/leads",
          event: "lead"
        })
        const third = yield* accept()
        expect(third).toMatchObject({ route: "event", deliveries: 2 })
        expect(yield* deliveriesOf(third.call_id)).toHaveLength(2)
        yield* (yield* Connections).set(accountId, TENANT.tenantId, settings(bridge, { transport: "rest", auth: "api_key" }))
        expect((yield* accept()).route).toBe("push")
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
          SELECT event, payload FROM deliveries WHERE call_id = ${callId}`
        expect(deliveries.map((d) => [d.event, d.payload.appointment.status, d.payload.appointment.external_id])).toEqual([
          ["booking", "requested", ""]
        ])
      }).pipe(Effect.scoped), 300_000)
  })
})
