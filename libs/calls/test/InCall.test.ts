import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import type { AppointmentInput, AvailabilityWindowInput, ContactInput } from "@crm-relay/bridge"
import { BridgeClients, Schedules } from "@crm-relay/bridge"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Vault } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Clock, Deferred, Duration, Effect, Either, Fiber, Layer, Option, Schedule, TestClock } from "effect"
import { Connections } from "../src/Connections.js"
import { InCall } from "../src/InCall.js"
import * as Harness from "./ConnectionsHarness.js"

const Live = InCall.Default.pipe(Layer.provideMerge(Harness.ConnectionsLive))

const contact: ContactInput = {
  full_name: "Ada Lovelace",
  first_name: "Ada",
  last_name: "Lovelace",
  address: "12 Analytical Row",
  source: "Receptionist (phone)",
  call_id: "",
  phones: ["+1 (555) 010-0042"],
  emails: ["ada@example.com"],
  tags: []
}

// Monday 3 March 2031 in New York (before the DST change): the bridge's calendar is open 09:00–17:00.
const window: AvailabilityWindowInput = {
  start: "2031-03-03T08:00:00-05:00",
  end: "2031-03-03T18:00:00-05:00",
  timezone: "America/New_York",
  windows: [],
  slot_minutes: 60,
  job_type: "Boiler repair"
}

const appointment = (contactId: string, hour = 9): AppointmentInput => ({
  contact_external_id: contactId,
  timezone: "America/New_York",
  start: `2031-03-03T${String(hour).padStart(2, "0")}:00:00-05:00`,
  end: `2031-03-03T${String(hour + 1).padStart(2, "0")}:00:00-05:00`,
  slot_text: "Monday morning",
  job_type: "Boiler repair",
  address: "12 Analytical Row",
  notes: "",
  title: "Boiler repair for Ada",
  source: "Receptionist (phone)"
})

/** A live account whose tenant t-1 is connected over `transport`, the bridge reset. */
const connected = (transport: "rest" | "mcp" = "rest", auth: "api_key" | "oauth" = "api_key") =>
  Effect.gen(function*() {
    yield* Harness.resetBridge
    const bridge = yield* ReferenceBridge.ReferenceBridge
    const { id } = yield* Harness.account("live")
    yield* (yield* Connections).set(id, Harness.TENANT.tenantId, Harness.settings(bridge, { transport, auth }))
    const mark = (yield* bridge.control.received).length
    return { accountId: id, tenantId: Harness.TENANT.tenantId, bridge, mark, inCall: yield* InCall }
  })

/** A contact's id at the bridge (created through the in-call upsert). */
const contactId = (inCall: InCall, accountId: string, tenantId: string, input: ContactInput = contact) =>
  Effect.map(inCall.contactsUpsert(accountId, tenantId, input), (answer) => (answer.ok ? answer.id : ""))

/** Waits (in real time) until the bridge holds the request its pending fault was set for. */
const faultTaken = (bridge: ReferenceBridge.ReferenceBridgeHandle) =>
  bridge.control.pendingFaults.pipe(
    Effect.filterOrFail((pending) => pending.length === 0),
    Effect.retry(Schedule.spaced("5 millis").pipe(Schedule.upTo(Eventually.HANG_BOUND))),
    Effect.withClock(Clock.make()),
    Effect.orDie
  )

/** The requests the bridge received on its bridge transports since it had received `mark` requests in all. */
const since = (bridge: ReferenceBridge.ReferenceBridgeHandle, mark: number) =>
  Effect.map(bridge.control.received, (all) => all.slice(mark).filter((r) => r.transport !== "oauth"))

layer(Live)("InCall", (it) => {
  for (const spec of Harness.MATRIX) {
    describe(`${spec.transport} transport × ${spec.auth}`, () => {
      it.effect("In-call API: search, upsert, availability and booking each answer {ok: true, ...receipt} after exactly one bridge exchange", () =>
        Effect.gen(function*() {
          const { accountId, bridge, inCall, mark, tenantId } = yield* connected(spec.transport, spec.auth)
          expect(yield* inCall.contactsSearch(accountId, tenantId, { phone: "+1 555 010 0042", email: "" })).toEqual({
            ok: true,
            contact: null
          })
          const upserted = yield* inCall.contactsUpsert(accountId, tenantId, contact)
          expect(upserted).toMatchObject({ ok: true, is_new: true })
          const id = upserted.ok ? upserted.id : ""
          expect(yield* inCall.contactsSearch(accountId, tenantId, { phone: "", email: "ADA@example.com" })).toEqual({
            ok: true,
            contact: { id }
          })
          const availability = yield* inCall.availabilityList(accountId, tenantId, window)
          expect(availability.ok).toBe(true)
          const slots = availability.ok ? availability.slots : []
          expect(slots.length).toBe(8)
          expect(slots[0]).toEqual({ start: "2031-03-03T09:00:00-05:00", end: "2031-03-03T10:00:00-05:00", timezone: "America/New_York" })
          const booked = yield* inCall.appointmentsCreate(accountId, tenantId, appointment(id))
          expect(booked).toMatchObject({
            ok: true,
            confirmed: true,
            start: "2031-03-03T09:00:00-05:00",
            end: "2031-03-03T10:00:00-05:00",
            timezone: "America/New_York"
          })
          // Errors rule 3: one exchange each, no retries.
          const received = yield* since(bridge, mark)
          expect(received.map((r) => r.operation)).toEqual([
            "contacts.search",
            "contacts.upsert",
            "contacts.search",
            "availability.list",
            "appointments.create"
          ])
          expect(received.every((r) => r.transport === spec.transport && r.tenantId === tenantId)).toBe(true)
          const records = yield* bridge.control.records
          expect(records.appointments.map((a) => a.id)).toEqual([booked.ok ? booked.id : "none"])
        }))
    })
  }

  for (const transport of Harness.TRANSPORTS) {
    it.effect(`Serialization rule 2 over ${transport}: "A field marked Optional is omitted when absent. It is never sent as null." — an empty postal_code ("Omitted when no postal code is supplied") and an empty service_id ("Omitted when empty") are left out of the bodies sent, and the upsert and the booking succeed`, () =>
      Effect.gen(function*() {
        const { accountId, bridge, inCall, mark, tenantId } = yield* connected(transport)
        const upserted = yield* inCall.contactsUpsert(accountId, tenantId, { ...contact, postal_code: "" })
        expect(upserted).toMatchObject({ ok: true, is_new: true })
        const id = upserted.ok ? upserted.id : ""
        const booked = yield* inCall.appointmentsCreate(accountId, tenantId, { ...appointment(id), service_id: "" })
        expect(booked).toMatchObject({ ok: true, confirmed: true })
        const received = yield* since(bridge, mark)
        expect(received.map((r) => [r.operation, r.status])).toEqual([["contacts.upsert", 200], ["appointments.create", 200]])
        const [upsertBody, bookingBody] = received.map((r) => JSON.stringify(r.body))
        expect(upsertBody).toContain("Ada Lovelace")
        expect(upsertBody).not.toContain("postal_code")
        expect(bookingBody).toContain("Boiler repair for Ada")
        expect(bookingBody).not.toContain("service_id")
      }))
  }

  it.effect("Operation rule 5: a taken slot answers {ok: false, reason: \"conflict\"} (409, never retried)", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected()
      const ada = yield* contactId(inCall, accountId, tenantId)
      const bob = yield* contactId(inCall, accountId, tenantId, { ...contact, full_name: "Bob", phones: ["+1 555 010 0099"], emails: [] })
      expect((yield* inCall.appointmentsCreate(accountId, tenantId, appointment(ada, 11))).ok).toBe(true)
      const taken = yield* inCall.appointmentsCreate(accountId, tenantId, appointment(bob, 11))
      expect(taken).toMatchObject({ ok: false, reason: "conflict" })
      // Outside the opening hours is a conflict too.
      expect(yield* inCall.appointmentsCreate(accountId, tenantId, appointment(bob, 20))).toMatchObject({ ok: false, reason: "conflict" })
      const attempts = (yield* since(bridge, mark)).filter((r) => r.operation === "appointments.create")
      expect(attempts.map((r) => r.status)).toEqual([200, 409, 409])
    }))

  it.effect("Errors rule 3: a slow bridge answers {ok: false, reason: \"timeout\"} when the in-call budget runs out, without waiting for a retry schedule", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected("mcp")
      const id = yield* contactId(inCall, accountId, tenantId)
      yield* bridge.control.setFault(Faults.delay(60_000), { operation: "appointments.create" })
      const before = yield* TestClock.currentTimeMillis
      const fiber = yield* Effect.fork(inCall.appointmentsCreate(accountId, tenantId, appointment(id)))
      yield* faultTaken(bridge)
      yield* TestClock.adjust(Schedules.inCallBudget)
      const answer = yield* Fiber.join(fiber)
      expect(answer).toMatchObject({ ok: false, reason: "timeout" })
      // Answered when the budget ran out, not later.
      expect((yield* TestClock.currentTimeMillis) - before).toBe(Duration.toMillis(Schedules.inCallBudget))
      // Not retried: a second attempt would have found no delay fault left and been answered (and logged) at once.
      yield* Effect.sleep("300 millis").pipe(Effect.withClock(Clock.make()))
      const answered = (yield* since(bridge, mark)).filter((r) => r.operation === "appointments.create")
      expect(answered).toEqual([])
    }))

  it.effect("Errors rule 3: \"In-call operations are time-bounded\" — the budget is the whole in-call request: a slow connection lookup before the exchange still answers {ok: false, reason: \"timeout\"} when the budget runs out", () =>
    Effect.gen(function*() {
      const { accountId, bridge, mark, tenantId } = yield* connected()
      const connections = yield* Connections
      const lookupStarted = yield* Deferred.make<void>()
      // The lookup (database, vault) is slow this time: it takes far longer than the budget.
      const slowLookup = Layer.succeed(
        Connections,
        Connections.make({
          ...connections,
          state: (account, tenant) =>
            Effect.zipRight(Deferred.succeed(lookupStarted, undefined), Effect.delay(connections.state(account, tenant), "60 seconds"))
        })
      )
      const inCall = yield* Effect.provide(InCall, InCall.Default.pipe(Layer.provide(slowLookup)))
      const before = yield* TestClock.currentTimeMillis
      const fiber = yield* Effect.fork(inCall.contactsUpsert(accountId, tenantId, contact))
      yield* Deferred.await(lookupStarted)
      yield* TestClock.adjust(Schedules.inCallBudget)
      yield* Eventually.eventually(Effect.map(Fiber.poll(fiber), Option.isSome))
      expect(yield* Fiber.join(fiber)).toMatchObject({ ok: false, reason: "timeout" })
      expect((yield* TestClock.currentTimeMillis) - before).toBe(Duration.toMillis(Schedules.inCallBudget))
      expect(yield* since(bridge, mark)).toEqual([])
    }))

  it.effect("Errors table: 429, 5xx and a lost connection answer {ok: false, reason: \"unavailable\"}", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected()
      // The lost connection stays lost: egress sends a request lost on a kept-alive connection once more, on a fresh one.
      for (const [fault, times] of [[Faults.status(429, { retryAfter: 30 }), 1], [Faults.status(503), 1], [Faults.lostResponse(), 2]] as const) {
        yield* bridge.control.setFault(fault, { operation: "contacts.upsert", times })
        expect(yield* inCall.contactsUpsert(accountId, tenantId, contact)).toMatchObject({ ok: false, reason: "unavailable" })
      }
      expect((yield* since(bridge, mark)).map((r) => [r.operation, r.status])).toEqual([
        ["contacts.upsert", 429],
        ["contacts.upsert", 503],
        ["contacts.upsert", "lost"],
        ["contacts.upsert", "lost"]
      ])
    }))

  it.effect("Errors table: a connection the bridge closed as it was reused costs the call nothing — sent again once, fresh, with the same Idempotency-Key", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected()
      expect(yield* inCall.contactsUpsert(accountId, tenantId, contact)).toMatchObject({ ok: true })
      yield* bridge.control.setFault(Faults.lostResponse(), { operation: "contacts.upsert" })
      const answer = yield* inCall.contactsUpsert(accountId, tenantId, contact)
      expect(answer).toMatchObject({ ok: true })
      const requests = (yield* since(bridge, mark)).filter((r) => r.operation === "contacts.upsert")
      expect(requests.map((r) => r.status)).toEqual([200, "lost", 200])
      expect(requests[2]!.idempotencyKey).toBe(requests[1]!.idempotencyKey)
    }))

  it.effect("Operation rule 5: an invalid receipt (unconfirmed, shifted time, empty id) answers {ok: false, reason: \"rejected\"} — no booking is reported", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, tenantId } = yield* connected()
      const id = yield* contactId(inCall, accountId, tenantId)
      for (const [kind, hour] of [["confirmed_false", 9], ["shifted_start", 10], ["empty_id", 11], ["missing_timestamp", 12]] as const) {
        yield* bridge.control.setFault(Faults.invalidReceipt(kind), { operation: "appointments.create" })
        const answer = yield* inCall.appointmentsCreate(accountId, tenantId, appointment(id, hour))
        expect(answer).toMatchObject({ ok: false, reason: "rejected" })
        expect("id" in answer).toBe(false)
      }
      // A malformed or empty 2xx is not a booking either.
      yield* bridge.control.setFault(Faults.emptyBody(), { operation: "appointments.create" })
      expect(yield* inCall.appointmentsCreate(accountId, tenantId, appointment(id, 13))).toMatchObject({ ok: false, reason: "rejected" })
    }))

  it.effect("rejected: a refused credential (401), another 4xx, and input refused before sending (Operation rules 7 and 3)", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected()
      yield* bridge.control.setFault(Faults.status(401), { operation: "contacts.search" })
      expect(yield* inCall.contactsSearch(accountId, tenantId, { phone: "1", email: "" })).toMatchObject({ ok: false, reason: "rejected" })
      yield* bridge.control.setFault(Faults.status(422), { operation: "contacts.search" })
      expect(yield* inCall.contactsSearch(accountId, tenantId, { phone: "1", email: "" })).toMatchObject({ ok: false, reason: "rejected" })
      expect((yield* since(bridge, mark)).map((r) => r.status)).toEqual([401, 422])
      const sent = (yield* bridge.control.received).length
      // Nothing is sent for input the contract refuses.
      const noIdentity = yield* inCall.contactsUpsert(accountId, tenantId, { ...contact, phones: [], emails: [" "] })
      expect(noIdentity).toMatchObject({ ok: false, reason: "rejected" })
      const noOffset = yield* inCall.appointmentsCreate(accountId, tenantId, { ...appointment("c-1"), start: "2031-03-03T09:00:00" })
      expect(noOffset).toMatchObject({ ok: false, reason: "rejected" })
      const backwards = yield* inCall.availabilityList(accountId, tenantId, { ...window, end: window.start })
      expect(backwards).toMatchObject({ ok: false, reason: "rejected" })
      expect(yield* since(bridge, sent)).toEqual([])
    }))

  it.effect("not_configured: demo and sandbox accounts, a tenant without connection, an operation the bridge does not offer — no bridge traffic; an unknown account is AccountNotFound", () =>
    Effect.gen(function*() {
      const { accountId, bridge, inCall, mark, tenantId } = yield* connected()
      const sql = yield* SqlClient.SqlClient
      for (const mode of ["demo", "sandbox"] as const) {
        const other = yield* Harness.account(mode)
        expect(yield* inCall.contactsUpsert(other.id, tenantId, contact)).toMatchObject({ ok: false, reason: "not_configured" })
      }
      expect(yield* inCall.contactsUpsert(accountId, "t-none", contact)).toMatchObject({ ok: false, reason: "not_configured" })
      yield* sql`UPDATE connections SET capabilities = ${
        JSON.stringify({ contract_version: "svc.crm.v1", operations: ["capabilities", "contacts.upsert", "leads.create"], booking_closes_availability: false })
      }::jsonb WHERE account_id = ${accountId}`
      expect(yield* inCall.availabilityList(accountId, tenantId, window)).toMatchObject({ ok: false, reason: "not_configured" })
      expect(yield* inCall.appointmentsCreate(accountId, tenantId, appointment("c-1"))).toMatchObject({ ok: false, reason: "not_configured" })
      expect(yield* inCall.contactsSearch(accountId, tenantId, { phone: "1", email: "" })).toMatchObject({ ok: false, reason: "not_configured" })
      // A live account switched to demo after connecting never reaches the bridge either.
      yield* sql`UPDATE accounts SET mode = 'demo' WHERE id = ${accountId}`
      expect(yield* inCall.contactsUpsert(accountId, tenantId, contact)).toMatchObject({ ok: false, reason: "not_configured" })
      expect(yield* since(bridge, mark)).toEqual([])
      const unknown = yield* Effect.either(inCall.contactsUpsert("0f8fad5b-d9cb-469f-a165-70867728950e", tenantId, contact))
      expect(Either.isLeft(unknown) && unknown.left._tag).toBe("AccountNotFound")
    }))

  it.effect("rotation keeps every connection working: after master-key rotate this replica and another one (own Vault, own clients) still call the bridge, with no restart", () =>
    Effect.gen(function*() {
      const { accountId, inCall, tenantId } = yield* connected("mcp", "oauth")
      const vault = yield* Vault.Vault
      // Another replica: its own Vault (key cache), Connections and client cache over the same database.
      const other = yield* Effect.provide(
        InCall,
        InCall.Default.pipe(
          Layer.provide(Connections.Default),
          Layer.provide(Layer.merge(Vault.layer(Harness.masterKeys), BridgeClients.DefaultWithoutDependencies))
        )
      )
      expect((yield* other.contactsUpsert(accountId, tenantId, contact)).ok).toBe(true)
      const report = yield* vault.rotate()
      expect(report.resealed).toBeGreaterThan(0)
      expect((yield* inCall.contactsSearch(accountId, tenantId, { phone: contact.phones[0]!, email: "" })).ok).toBe(true)
      expect((yield* other.contactsSearch(accountId, tenantId, { phone: contact.phones[0]!, email: "" })).ok).toBe(true)
      const found = yield* (yield* Connections).find(accountId, tenantId)
      expect(Option.isSome(found)).toBe(true)
    }))
})
