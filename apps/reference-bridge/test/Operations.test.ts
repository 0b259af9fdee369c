/**
 * Operation rules 1–6, Idempotency rule 1 and Errors rule 2 over both
 * transports, against a real bridge on loopback HTTPS.
 */
import { Operations } from "@crm-relay/contract"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Faults from "../src/Faults.js"
import type { TransportName } from "./support/bridgeClient.js"
import { call } from "./support/bridgeClient.js"
import { appointment, bodies, contact, isValidReceipt, lead, MONDAY_10, newKey, window } from "./support/fixtures.js"
import { startBridge } from "./support/startBridge.js"

const ALL = [...Operations.OPERATIONS]

describe.each<TransportName>(["rest", "mcp"])("%s transport", (transport) => {
  /** A bridge plus a caller bound to this transport. */
  const setup = (options: Parameters<typeof startBridge>[0] = {}) =>
    Effect.map(startBridge(options), ({ agent, bridge }) => ({
      bridge,
      op: (operation: Operations.OperationName, body: Record<string, unknown>, opts: Parameters<typeof call>[5] = {}) =>
        call(transport, bridge, agent, operation, body, opts)
    }))

  it.scopedLive("Operation rule 1: capabilities returns the exact contract version and every served operation", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const answer = yield* op("capabilities", bodies.capabilities())
      expect(answer.status).toBe(200)
      expect(answer.receipt).toEqual({ contract_version: "svc.crm.v1", operations: ALL, booking_closes_availability: true })
      if (transport === "mcp") {
        const [message] = answer.messages
        expect(message).toMatchObject({ jsonrpc: "2.0", id: answer.rpcId, result: { resultType: "complete", isError: false } })
      }
    }))

  it.scopedLive("Operation rule 1: only the configured operations are advertised; others answer 404", () =>
    Effect.gen(function*() {
      const { op } = yield* setup({
        operations: ["capabilities", "contacts.upsert", "leads.create"],
        bookingClosesAvailability: false
      })
      const caps = yield* op("capabilities", bodies.capabilities())
      expect(caps.receipt).toEqual({
        contract_version: "svc.crm.v1",
        operations: ["capabilities", "contacts.upsert", "leads.create"],
        booking_closes_availability: false
      })
      const unsupported = yield* op("availability.list", bodies.availability(window(MONDAY_10.start, MONDAY_10.end)))
      expect(unsupported.status).toBe(404)
      expect(isValidReceipt("availability.list", unsupported.receipt)).toBe(false)
    }))

  it.scopedLive("Operation rule 2: contacts.search never invents a match: null when nothing matches", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const none = yield* op("contacts.search", bodies.search("+1 555 010 0000", "ada@example.com"))
      expect(none.status).toBe(200)
      expect(none.receipt).toEqual({ contact: null })
      const { receipt } = yield* op("contacts.upsert", bodies.upsert())
      const id = (receipt as { id: string }).id
      const byPhone = yield* op("contacts.search", bodies.search("15550100000", ""))
      expect(byPhone.receipt).toEqual({ contact: { id } })
      const byEmail = yield* op("contacts.search", bodies.search("", "ADA@example.COM"))
      expect(byEmail.receipt).toEqual({ contact: { id } })
    }))

  it.scopedLive("Operation rule 3: contacts.upsert matches phone or email identity before creating; is_new is a real boolean", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const created = yield* op("contacts.upsert", bodies.upsert())
      expect(created.status).toBe(200)
      expect(created.receipt).toMatchObject({ is_new: true })
      const matched = yield* op("contacts.upsert", bodies.upsert(contact({ phones: [], emails: ["ada@example.com"] })))
      expect(matched.receipt).toEqual({ id: (created.receipt as { id: string }).id, is_new: false })
      expect(typeof (matched.receipt as { is_new: unknown }).is_new).toBe("boolean")
      expect((yield* bridge.control.records).contacts).toHaveLength(1)
    }))

  it.scopedLive("Operation rule 4: availability.list returns at most 50 openings, each inside the interval with end after start", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const start = "2026-03-02T00:00:00-05:00"
      const end = "2026-03-23T00:00:00-04:00"
      const answer = yield* op("availability.list", bodies.availability(window(start, end, { slot_minutes: 30 })))
      expect(answer.status).toBe(200)
      expect(isValidReceipt("availability.list", answer.receipt)).toBe(true)
      const slots = (answer.receipt as { slots: Array<{ start: string; end: string; timezone: string }> }).slots
      expect(slots).toHaveLength(50)
      const ms = (s: string) => new Date(s).getTime()
      for (const slot of slots) {
        expect(ms(slot.start)).toBeGreaterThanOrEqual(ms(start))
        expect(ms(slot.end)).toBeLessThanOrEqual(ms(end))
        expect(ms(slot.end) - ms(slot.start)).toBe(30 * 60_000)
        expect(slot.timezone).toBe("America/New_York")
      }
      expect(slots.map((s) => ms(s.start))).toEqual([...slots.map((s) => ms(s.start))].sort((a, b) => a - b))
      expect(slots[0]!.start).toBe("2026-03-02T09:00:00-05:00")
    }))

  it.scopedLive("Operation rule 4: a prior availability read reserves nothing, and a booking closes availability", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const monday = bodies.availability(
        window("2026-03-02T00:00:00-05:00", "2026-03-03T00:00:00-05:00", { windows: [[0, 600, 720]], slot_minutes: 60 })
      )
      const before = yield* op("availability.list", monday)
      expect(before.receipt).toEqual({
        slots: [
          { start: "2026-03-02T10:00:00-05:00", end: "2026-03-02T11:00:00-05:00", timezone: "America/New_York" },
          { start: "2026-03-02T11:00:00-05:00", end: "2026-03-02T12:00:00-05:00", timezone: "America/New_York" }
        ]
      })
      const { id } = (yield* op("contacts.upsert", bodies.upsert())).receipt as { id: string }
      const booked = yield* op("appointments.create", bodies.appointment(appointment(id, MONDAY_10)))
      expect(booked.status).toBe(200)
      const after = yield* op("availability.list", monday)
      expect(after.receipt).toEqual({
        slots: [{ start: "2026-03-02T11:00:00-05:00", end: "2026-03-02T12:00:00-05:00", timezone: "America/New_York" }]
      })
    }))

  it.scopedLive("Operation rule 5: the receipt is confirmed and echoes the exact requested instants", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const { id } = (yield* op("contacts.upsert", bodies.upsert())).receipt as { id: string }
      const interval = { start: "2026-03-02T15:00:00Z", end: "2026-03-02T16:00:00.000Z" }
      const answer = yield* op("appointments.create", bodies.appointment(appointment(id, interval)))
      expect(answer.status).toBe(200)
      expect(answer.receipt).toMatchObject({ confirmed: true, ...interval, timezone: "America/New_York" })
      expect(isValidReceipt("appointments.create", answer.receipt)).toBe(true)
    }))

  it.scopedLive("Operation rule 5: 409 when the slot is taken or closed, never a receipt for a different time", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const { id } = (yield* op("contacts.upsert", bodies.upsert())).receipt as { id: string }
      expect((yield* op("appointments.create", bodies.appointment(appointment(id)))).status).toBe(200)
      const taken = yield* op("appointments.create", bodies.appointment(appointment(id)))
      expect(taken.status).toBe(409)
      expect(taken.receipt === undefined || !isValidReceipt("appointments.create", taken.receipt)).toBe(true)
      const saturday = { start: "2026-03-07T10:00:00-05:00", end: "2026-03-07T11:00:00-05:00" }
      expect((yield* op("appointments.create", bodies.appointment(appointment(id, saturday)))).status).toBe(409)
      const unknownContact = yield* op(
        "appointments.create",
        bodies.appointment(appointment("ct_unknown", { start: "2026-03-02T13:00:00-05:00", end: "2026-03-02T14:00:00-05:00" }))
      )
      expect(unknownContact.status).toBe(400)
      expect((yield* bridge.control.records).appointments).toHaveLength(1)
    }))

  it.scopedLive("Operation rule 5: ten concurrent bookings of one slot: exactly one receipt, nine 409", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const { id } = (yield* op("contacts.upsert", bodies.upsert())).receipt as { id: string }
      const answers = yield* Effect.all(
        Array.from({ length: 10 }, () => op("appointments.create", bodies.appointment(appointment(id)))),
        { concurrency: "unbounded" }
      )
      expect(answers.filter((a) => a.status === 200)).toHaveLength(1)
      expect(answers.filter((a) => a.status === 409)).toHaveLength(9)
      expect((yield* bridge.control.records).appointments).toHaveLength(1)
    }))

  it.scopedLive("Operation rule 6: leads.create creates, or returns the existing lead for the same idempotency key", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const key = newKey()
      const first = yield* op("leads.create", bodies.lead(lead(), key))
      expect(first.status).toBe(200)
      expect(isValidReceipt("leads.create", first.receipt)).toBe(true)
      const replay = yield* op("leads.create", bodies.lead(lead({ summary: "edited" }), key))
      expect(replay.receipt).toEqual(first.receipt)
      const other = yield* op("leads.create", bodies.lead(lead()))
      expect(other.receipt).not.toEqual(first.receipt)
      expect((yield* bridge.control.records).leads).toHaveLength(2)
    }))

  it.scopedLive("Idempotency rule 1: replaying each write returns the original record and stores nothing new", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const upsert = bodies.upsert()
      const u1 = yield* op("contacts.upsert", upsert)
      const u2 = yield* op("contacts.upsert", upsert)
      expect(u2.receipt).toEqual(u1.receipt)
      const booking = bodies.appointment(appointment((u1.receipt as { id: string }).id))
      const a1 = yield* op("appointments.create", booking)
      const a2 = yield* op("appointments.create", booking)
      expect(a1.status).toBe(200)
      expect(a2.status).toBe(200)
      expect(a2.receipt).toEqual(a1.receipt)
      const records = yield* bridge.control.records
      expect([records.contacts.length, records.appointments.length, records.idempotency.length]).toEqual([1, 1, 2])
    }))

  it.scopedLive("Errors rule 2: after a lost response following a committed write, the replay returns the original receipt", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      yield* bridge.control.setFault(Faults.lostResponse(), { operation: "leads.create", transport })
      const body = bodies.lead()
      const lost = yield* Effect.either(op("leads.create", body))
      expect(Either.isLeft(lost)).toBe(true)
      const committed = yield* bridge.control.records
      expect(committed.leads).toHaveLength(1)
      const replay = yield* op("leads.create", body)
      expect(replay.status).toBe(200)
      expect(replay.receipt).toEqual({ id: committed.leads[0]!.id })
      const received = (yield* bridge.control.received).filter((r) => r.operation === "leads.create")
      expect(received.map((r) => r.status)).toEqual(["lost", 200])
      expect(received.map((r) => r.idempotencyKey)).toEqual([body.idempotency_key, body.idempotency_key])
      expect((yield* bridge.control.records).leads).toHaveLength(1)
    }))

  it.scopedLive("Serialization rule 3: unknown additional fields are accepted at every level", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const body = { ...bodies.upsert(contact({ nickname: "Countess" })), future_field: { nested: true } }
      const answer = yield* op("contacts.upsert", body)
      expect(answer.status).toBe(200)
      expect(answer.receipt).toMatchObject({ is_new: true })
    }))

  it.scopedLive("a body that breaks the contract (contract_version svc.crm.v2) is refused with 400", () =>
    Effect.gen(function*() {
      const { op } = yield* setup()
      const answer = yield* op("capabilities", { tenant_id: "tenant-a", contract_version: "svc.crm.v2" })
      expect(answer.status).toBe(400)
    }))

  it.scopedLive("the Idempotency-Key header must be sent on writes and equal the body's idempotency_key", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const missing = yield* op("leads.create", bodies.lead(), { headers: { "idempotency-key": null } })
      expect(missing.status).toBe(400)
      const different = yield* op("leads.create", bodies.lead(), { headers: { "idempotency-key": newKey() } })
      expect(different.status).toBe(400)
      expect((yield* bridge.control.records).leads).toHaveLength(0)
    }))

  it.scopedLive("the received log shows transport, operation, tenant, headers with Idempotency-Key, and body", () =>
    Effect.gen(function*() {
      const { bridge, op } = yield* setup()
      const body = bodies.upsert()
      yield* op("contacts.upsert", body)
      const [entry] = yield* bridge.control.received
      expect(entry).toMatchObject({
        seq: 1,
        transport,
        operation: "contacts.upsert",
        tenantId: "tenant-a",
        principal: { kind: "api_key", tenantId: "tenant-a" },
        idempotencyKey: body.idempotency_key,
        authorizationScheme: "Bearer",
        status: 200
      })
      expect(entry!.headers["authorization"]).toBeUndefined()
      expect(entry!.headers["idempotency-key"]).toBe(body.idempotency_key)
      const recorded = transport === "rest" ? entry!.body : (entry!.body as { params: { arguments: unknown } }).params.arguments
      expect(recorded).toEqual(body)
    }))

})
