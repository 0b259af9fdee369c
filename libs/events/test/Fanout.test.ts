import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Events } from "@crm-relay/contract"
import { Notifier } from "@crm-relay/store"
import { ListenProbe } from "@crm-relay/testing"
import { Effect, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import { AccountId, Accounts } from "../src/Accounts.js"
import * as Fanout from "../src/Fanout.js"
import * as Deliveries from "../src/Deliveries.js"
import { IntegrationKeys } from "../src/IntegrationKeys.js"
import { Preview } from "../src/Preview.js"
import { Subscriptions } from "../src/Subscriptions.js"
import * as Fixtures from "./support/Fixtures.js"
import { ServicesLive } from "./support/Services.js"

const TestLive = Fanout.Fanout.Default.pipe(Layer.provideMerge(ServicesLive))

/** The sample caller, with the Optional postal_code present. */
const contact: Events.EventContact = { ...Fixtures.contact, postal_code: "12345" }

const leadEvent = (accountId: string): Fanout.EventInput => ({
  accountId,
  callId: "call-1",
  source: "Receptionist (phone)",
  contact,
  jobType: "Boiler repair",
  summary: "No hot water",
  appointment: Option.none()
})

const bookingEvent = (accountId: string, externalId: string): Fanout.EventInput => ({
  ...leadEvent(accountId),
  callId: "call-2",
  appointment: Option.some({
    external_id: externalId,
    status: externalId === "" ? "requested" : "scheduled",
    start: Schema.decodeSync(Events.EventAppointment.fields.start)("2031-03-03T09:00:00-05:00"),
    end: Schema.decodeSync(Events.EventAppointment.fields.end)("2031-03-03T10:00:00-05:00"),
    timezone: Schema.decodeSync(Events.EventAppointment.fields.timezone)("America/New_York"),
    slot_text: "Monday at nine",
    title: "Boiler repair",
    job_type: "Boiler repair",
    address: "1 Analytical Way"
  })
})

const setup = Effect.gen(function*() {
  const account = yield* (yield* Accounts).create({ name: "Acme", mode: "live" })
  const key = yield* (yield* IntegrationKeys).create(account.id)
  const subscriptions = yield* Subscriptions
  const subscribe = (event: string, targetUrl = `https://hooks.example.com/${event}`) =>
    subscriptions.create({ accountId: account.id, keyId: key.id, targetUrl, event })
  return { accountId: account.id, subscribe }
})

const deliveriesOf = (accountId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ subscription_id: string; event: string; target_url: string; payload: Events.DeliveredEvent; id: string }>`
      SELECT id, subscription_id, event, target_url, ${sql.literal(Deliveries.bodySql)}::jsonb AS payload FROM deliveries
      WHERE account_id = ${accountId} ORDER BY target_url, id`)

describe("Fanout", () => {
  it.layer(TestLive)((it) => {
    it.effect("Events: a lead event goes to lead and all subscriptions, not to booking or unknown ones (rule 3)", () =>
      Effect.gen(function*() {
        const { accountId, subscribe } = yield* setup
        const lead = yield* subscribe("lead")
        const all = yield* subscribe("all")
        yield* subscribe("booking")
        yield* subscribe("Lead")
        const ids = yield* (yield* Fanout.Fanout).enqueue(leadEvent(accountId))
        expect(ids).toHaveLength(2)
        const rows = yield* deliveriesOf(accountId)
        expect(rows.map((r) => r.subscription_id).sort()).toEqual([all, lead].sort())
        expect(rows.every((r) => r.event === "lead")).toBe(true)
      }))

    it.effect("Events rule 4: repeated subscriptions produce duplicate pushes, each with its own delivery id", () =>
      Effect.gen(function*() {
        const { accountId, subscribe } = yield* setup
        yield* subscribe("booking", "https://hooks.example.com/same")
        yield* subscribe("booking", "https://hooks.example.com/same")
        yield* subscribe("all", "https://hooks.example.com/same")
        yield* subscribe("lead")
        const ids = yield* (yield* Fanout.Fanout).enqueue(bookingEvent(accountId, "appt-9"))
        expect(new Set(ids).size).toBe(3)
        const rows = yield* deliveriesOf(accountId)
        expect(rows).toHaveLength(3)
        expect(rows.map((r) => r.payload.id).sort()).toEqual(rows.map((r) => r.id).sort())
      }))

    it.effect("payloads are the contract's LeadEvent / BookingEvent; id = delivery id; created_at offset-aware", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2031-03-01T12:00:00Z"))
        const { accountId, subscribe } = yield* setup
        yield* subscribe("all")
        const fanout = yield* Fanout.Fanout
        yield* fanout.enqueue(leadEvent(accountId))
        yield* fanout.enqueue(bookingEvent(accountId, ""))
        const rows = yield* deliveriesOf(accountId)
        const lead = rows.find((r) => r.event === "lead")!
        const booking = rows.find((r) => r.event === "booking")!
        expect(Schema.decodeUnknownSync(Events.LeadEvent)(lead.payload)).toEqual({
          id: lead.id,
          event: "lead",
          call_id: "call-1",
          source: "Receptionist (phone)",
          contact,
          job_type: "Boiler repair",
          summary: "No hot water",
          booked: false,
          created_at: "2031-03-01T12:00:00.000Z"
        })
        const decoded = Schema.decodeUnknownSync(Events.BookingEvent)(booking.payload)
        expect(decoded.booked).toBe(false)
        expect(decoded.appointment.status).toBe("requested")
        expect(decoded.appointment.external_id).toBe("")
      }))

    it.effect("the preview reads what the delivery carries: contact external id, call id, source, booked", () =>
      Effect.gen(function*() {
        const { accountId, subscribe } = yield* setup
        yield* subscribe("booking")
        yield* (yield* Fanout.Fanout).enqueue(bookingEvent(accountId, "appt-1"))
        const [record] = yield* (yield* Preview).list(Schema.decodeSync(AccountId)(accountId), 3)
        expect(record).toMatchObject({
          call_id: "call-2",
          source: "Receptionist (phone)",
          contact: { external_id: "crm-contact-7" },
          booked: true
        })
      }))

    it.effect("no matching subscription: no delivery and nothing to notify", () =>
      Effect.gen(function*() {
        const { accountId, subscribe } = yield* setup
        yield* subscribe("booking")
        expect(yield* (yield* Fanout.Fanout).enqueue(leadEvent(accountId))).toEqual([])
        expect(yield* deliveriesOf(accountId)).toEqual([])
      }))
  })

  it.live("inside a transaction: rolled back with it, and the delivery worker is notified only at COMMIT", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const notifier = yield* Notifier.Notifier
      const { accountId, subscribe } = yield* setup
      yield* subscribe("lead")
      const fanout = yield* Fanout.Fanout
      // Payloads the test sends itself: to learn that the listener is live, and that it heard all sent before.
      const own = new Set(["probe", "end"])
      const probe = ListenProbe.make()
      const heard = yield* probe.tap(notifier.listen(Fanout.DELIVERIES_CHANNEL)).pipe(
        Stream.filter((payload) => !own.has(payload)),
        Stream.take(1),
        Stream.runCollect,
        Effect.fork
      )
      yield* probe.hears(notifier.notify(Fanout.DELIVERIES_CHANNEL, "probe"))
      const rolledBack = yield* sql.withTransaction(
        Effect.zipRight(fanout.enqueue(leadEvent(accountId)), Effect.fail("abort" as const))
      ).pipe(Effect.flip)
      expect(rolledBack).toBe("abort")
      expect(yield* deliveriesOf(accountId)).toEqual([])
      // A notification of the rolled-back transaction would have arrived before this one.
      yield* probe.hears(notifier.notify(Fanout.DELIVERIES_CHANNEL, "end"))
      expect(Option.isNone(yield* Fiber.poll(heard))).toBe(true)
      yield* sql.withTransaction(fanout.enqueue(leadEvent(accountId)))
      expect(yield* deliveriesOf(accountId)).toHaveLength(1)
      const payloads = yield* Fiber.join(heard)
      expect([...payloads]).toEqual(["lead"])
    }).pipe(Effect.provide(TestLive)))
})
