import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Events } from "@crm-relay/contract"
import { Effect, Layer, Option, Schema, TestClock } from "effect"
import { Accounts } from "../src/Accounts.js"
import * as Fanout from "../src/Fanout.js"
import { IntegrationKeys } from "../src/IntegrationKeys.js"
import { Preview } from "../src/Preview.js"
import { Subscriptions } from "../src/Subscriptions.js"
import * as Fixtures from "./support/Fixtures.js"
import { ServicesLive } from "./support/Services.js"

const insertDelivery = (delivery: {
  readonly accountId: string
  readonly callId: string
  readonly contact: string
  readonly appointment: string | null
  readonly createdAt: Date
}) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string }>`INSERT INTO deliveries
      (account_id, event, call_id, source, contact_external_id, appointment_external_id, payload, created_at)
      VALUES (${delivery.accountId}, 'lead', ${delivery.callId}, 'Receptionist (phone)', ${delivery.contact},
        ${delivery.appointment}, ${{ secret: "Jane Doe +15550100" }}, ${delivery.createdAt})
      RETURNING id`.pipe(Effect.map((rows) => rows[0]!.id)))

/** A caller with no CRM id yet. */
const contact: Events.EventContact = { ...Fixtures.contact, external_id: "" }

const appointment: Events.EventAppointment = {
  external_id: "apt-1",
  status: "scheduled",
  start: Schema.decodeSync(Events.EventAppointment.fields.start)("2031-06-03T09:00:00Z"),
  end: Schema.decodeSync(Events.EventAppointment.fields.end)("2031-06-03T10:00:00Z"),
  timezone: Schema.decodeSync(Events.EventAppointment.fields.timezone)("Europe/London"),
  slot_text: "Tuesday at ten",
  title: "Boiler repair",
  job_type: "Boiler repair",
  address: "1 Analytical Way"
}

describe("Preview", () => {
  it.layer(Fanout.Fanout.Default.pipe(Layer.provideMerge(ServicesLive)))((it) => {
    it.effect("Preview: an account with no deliveries gets the synthetic example record", () =>
      Effect.gen(function*() {
        const account = yield* (yield* Accounts).create({ name: "Empty", mode: "live" })
        expect(yield* (yield* Preview).list(account.id, 3)).toEqual([Events.SAMPLE_PREVIEW])
      }))

    it.effect("Preview record: latest deliveries first, contact holds only external_id, job_type and summary empty, booked = has an external appointment id", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const account = yield* accounts.create({ name: "Busy", mode: "live" })
        const other = yield* accounts.create({ name: "Other", mode: "live" })
        const at = (minute: number) => new Date(Date.UTC(2030, 0, 1, 0, minute))
        const oldest = yield* insertDelivery({ accountId: account.id, callId: "c1", contact: "crm-1", appointment: null, createdAt: at(1) })
        const booked = yield* insertDelivery({ accountId: account.id, callId: "c2", contact: "crm-2", appointment: "apt-9", createdAt: at(2) })
        const emptyAppointment = yield* insertDelivery({ accountId: account.id, callId: "c3", contact: "", appointment: "", createdAt: at(3) })
        yield* insertDelivery({ accountId: other.id, callId: "x", contact: "x", appointment: null, createdAt: at(4) })
        const records = yield* (yield* Preview).list(account.id, 20)
        expect(records).toEqual([
          { id: emptyAppointment, call_id: "c3", source: "Receptionist (phone)", contact: { external_id: "" }, job_type: "", summary: "", booked: false },
          { id: booked, call_id: "c2", source: "Receptionist (phone)", contact: { external_id: "crm-2" }, job_type: "", summary: "", booked: true },
          { id: oldest, call_id: "c1", source: "Receptionist (phone)", contact: { external_id: "crm-1" }, job_type: "", summary: "", booked: false }
        ])
        expect((yield* (yield* Preview).list(account.id, 2)).map((r) => r.id)).toEqual([emptyAppointment, booked])
        // Out-of-range limits are clamped to 1..20.
        expect(yield* (yield* Preview).list(account.id, 0)).toHaveLength(1)
        expect(yield* (yield* Preview).list(account.id, 500)).toHaveLength(3)
      }))

    it.effect("Preview record: real deliveries from the fan-out — one record per event even with duplicate subscriptions, contact only external_id, job_type and summary empty, booked = has an external appointment id", () =>
      Effect.gen(function*() {
        const account = yield* (yield* Accounts).create({ name: "Fanned", mode: "live" })
        const key = yield* (yield* IntegrationKeys).create(account.id)
        const subscriptions = yield* Subscriptions
        for (const event of ["lead", "all", "all", "booking"]) {
          yield* subscriptions.create({ accountId: account.id, keyId: key.id, targetUrl: "https://hooks.example.com/x", event })
        }
        const fanout = yield* Fanout.Fanout
        const event = (callId: string, appointment: Option.Option<Events.EventAppointment>): Fanout.EventInput => ({
          accountId: account.id,
          callId,
          source: "Receptionist (phone)",
          contact: { ...contact, external_id: `crm-${callId}` },
          jobType: "Boiler repair",
          summary: "No hot water",
          appointment
        })
        yield* TestClock.setTime(Date.UTC(2031, 5, 1))
        const lead = yield* fanout.enqueue(event("p-1", Option.none()))
        yield* TestClock.adjust("1 second")
        const booking = yield* fanout.enqueue(event("p-2", Option.some(appointment)))
        expect(lead).toHaveLength(3)
        expect(booking).toHaveLength(3)
        const records = yield* (yield* Preview).list(account.id, 20)
        expect(records).toHaveLength(2)
        expect(records[0]).toEqual({
          id: records[0]!.id,
          call_id: "p-2",
          source: "Receptionist (phone)",
          contact: { external_id: "crm-p-2" },
          job_type: "",
          summary: "",
          booked: true
        })
        expect(booking).toContain(records[0]!.id)
        expect(records[1]).toMatchObject({ call_id: "p-1", contact: { external_id: "crm-p-1" }, job_type: "", summary: "", booked: false })
        expect(lead).toContain(records[1]!.id)
        expect((yield* (yield* Preview).list(account.id, 1)).map((r) => r.call_id)).toEqual(["p-2"])
      }))
  })
})
