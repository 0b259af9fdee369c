/**
 * The two BridgeStore Layers against one suite: identity matching,
 * idempotent replay, atomic booking under concurrency, tenant isolation.
 * The SQL Layer runs on @crm-relay/store's TestDatabase: PGlite, or a fresh
 * schema on PostgreSQL when DATABASE_URL is set.
 */
import { TestDatabase } from "@crm-relay/store"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import { BridgeStore } from "../src/BridgeStore.js"
import * as MemoryStore from "../src/MemoryStore.js"
import * as SqlStore from "../src/SqlStore.js"
import { appointment, contact, decodeAppointment, decodeContact, decodeLead, lead, newKey, TENANT_A, TENANT_B } from "./support/fixtures.js"

const MON_10 = Date.UTC(2026, 2, 2, 15) // 10:00 in New York
const HOUR = 3_600_000

const booking = (contactId: string, startMs = MON_10, endMs = MON_10 + HOUR, capacity = 1) => ({
  appointment: decodeAppointment(appointment(contactId)),
  startMs,
  endMs,
  capacity
})

const stores = [
  ["MemoryStore", MemoryStore.layer],
  ["SqlStore", SqlStore.layer().pipe(Layer.provide(TestDatabase.layer), Layer.orDie)]
] as const

for (const [name, storeLayer] of stores) {
  describe(name, () => {
    layer(storeLayer)((it) => {
      const fresh = Effect.tap(BridgeStore, (store) => store.reset)

      it.effect("Operation rule 3: upsert creates (is_new true), then matches the same phone digits (is_new false)", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const first = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          expect(first.is_new).toBe(true)
          const again = yield* store.upsertContact(
            TENANT_A,
            newKey(),
            decodeContact(contact({ phones: ["15550100000"], emails: [], full_name: "Ada L." }))
          )
          expect(again).toEqual({ id: first.id, is_new: false })
          const records = yield* store.records
          expect(records.contacts).toHaveLength(1)
          expect(records.contacts[0]!.contact.full_name).toBe("Ada L.")
          expect(records.contacts[0]!.contact.phones).toEqual(["+1 (555) 010-0000", "15550100000"])
        }))

      it.effect("Operation rule 3: upsert matches by email identity, case-insensitively", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const first = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          const byEmail = yield* store.upsertContact(
            TENANT_A,
            newKey(),
            decodeContact(contact({ phones: [], emails: ["  ada@EXAMPLE.com "] }))
          )
          expect(byEmail).toEqual({ id: first.id, is_new: false })
        }))

      it.effect("Idempotency rule 1: replaying an upsert key returns the original receipt, even is_new true", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const key = newKey()
          const first = yield* store.upsertContact(TENANT_A, key, decodeContact(contact()))
          const replay = yield* store.upsertContact(TENANT_A, key, decodeContact(contact({ full_name: "Changed" })))
          expect(replay).toEqual(first)
          expect(replay.is_new).toBe(true)
          const records = yield* store.records
          expect(records.contacts).toHaveLength(1)
          expect(records.contacts[0]!.contact.full_name).toBe("Ada Lovelace")
          expect(records.idempotency).toHaveLength(1)
        }))

      it.effect("Operation rule 2: search never invents a match; it finds by digits or email, per tenant", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          expect(yield* store.searchContact(TENANT_A, "+1 555 010 0000", "")).toEqual(Option.none())
          const { id } = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          expect(yield* store.searchContact(TENANT_A, "+1 555 010 0000", "")).toEqual(Option.some(id))
          expect(yield* store.searchContact(TENANT_A, "", "ADA@example.com")).toEqual(Option.some(id))
          expect(yield* store.searchContact(TENANT_A, "555 010 0001", "other@example.com")).toEqual(Option.none())
          expect(yield* store.searchContact(TENANT_A, "", "")).toEqual(Option.none())
          expect(yield* store.searchContact(TENANT_B, "+1 555 010 0000", "")).toEqual(Option.none())
        }))

      it.effect("Operation rule 6: a lead is created once per idempotency key", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const key = newKey()
          const first = yield* store.createLead(TENANT_A, key, decodeLead(lead()))
          const replay = yield* store.createLead(TENANT_A, key, decodeLead(lead({ summary: "changed" })))
          const other = yield* store.createLead(TENANT_A, newKey(), decodeLead(lead()))
          expect(replay).toEqual(first)
          expect(other.id).not.toBe(first.id)
          const records = yield* store.records
          expect(records.leads.map((l) => l.id)).toEqual([first.id, other.id])
          expect(records.leads[0]!.lead.summary).toBe("Boiler makes a noise")
        }))

      it.effect("Operation rule 5: a booking echoes the requested instants; an overlapping one is refused as taken", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const { id: contactId } = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          const key = newKey()
          const receipt = yield* store.createAppointment(TENANT_A, key, booking(contactId))
          expect(receipt).toMatchObject({
            confirmed: true,
            start: "2026-03-02T10:00:00-05:00",
            end: "2026-03-02T11:00:00-05:00",
            timezone: "America/New_York"
          })
          const overlap = yield* Effect.either(
            store.createAppointment(TENANT_A, newKey(), booking(contactId, MON_10 + HOUR / 2, MON_10 + HOUR + HOUR / 2))
          )
          expect(Either.isLeft(overlap) && overlap.left._tag).toBe("SlotTaken")
          const adjacent = yield* Effect.either(
            store.createAppointment(TENANT_A, newKey(), booking(contactId, MON_10 + HOUR, MON_10 + 2 * HOUR))
          )
          expect(Either.isRight(adjacent)).toBe(true)
          // Idempotency rule 1: the replay is the original receipt although the slot is now full.
          expect(yield* store.createAppointment(TENANT_A, key, booking(contactId))).toEqual(receipt)
          expect((yield* store.records).appointments).toHaveLength(2)
          expect(yield* store.bookedIntervals(TENANT_A, MON_10, MON_10 + HOUR)).toEqual([
            { startMs: MON_10, endMs: MON_10 + HOUR }
          ])
          expect(yield* store.bookedIntervals(TENANT_B, MON_10, MON_10 + HOUR)).toEqual([])
        }))

      it.effect("Operation rule 5: capacity 2 allows two overlapping bookings, not three", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const { id: contactId } = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          const attempt = () => Effect.either(store.createAppointment(TENANT_A, newKey(), booking(contactId, MON_10, MON_10 + HOUR, 2)))
          const outcomes = [yield* attempt(), yield* attempt(), yield* attempt()]
          expect(outcomes.map(Either.isRight)).toEqual([true, true, false])
        }))

      it.effect("a booking for a contact this tenant does not have is refused", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const { id: contactId } = yield* store.upsertContact(TENANT_B, newKey(), decodeContact(contact()))
          const outcome = yield* Effect.either(store.createAppointment(TENANT_A, newKey(), booking(contactId)))
          expect(Either.isLeft(outcome) && outcome.left._tag).toBe("UnknownContact")
        }))

      it.effect("Operation rule 5: twenty concurrent bookings of one slot give exactly one receipt", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const { id: contactId } = yield* store.upsertContact(TENANT_A, newKey(), decodeContact(contact()))
          const outcomes = yield* Effect.all(
            Array.from({ length: 20 }, () => Effect.either(store.createAppointment(TENANT_A, newKey(), booking(contactId)))),
            { concurrency: "unbounded" }
          )
          expect(outcomes.filter(Either.isRight)).toHaveLength(1)
          expect(outcomes.filter((o) => Either.isLeft(o) && o.left._tag === "SlotTaken")).toHaveLength(19)
          expect((yield* store.records).appointments).toHaveLength(1)
        }))

      it.effect("Idempotency rule 1: twenty concurrent writes with one key create one record and one receipt", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          const key = newKey()
          const receipts = yield* Effect.all(
            Array.from({ length: 20 }, () => store.createLead(TENANT_A, key, decodeLead(lead()))),
            { concurrency: "unbounded" }
          )
          expect(new Set(receipts.map((r) => r.id)).size).toBe(1)
          const records = yield* store.records
          expect(records.leads).toHaveLength(1)
          expect(records.idempotency).toHaveLength(1)
        }))

      it.effect("reset deletes every record", () =>
        Effect.gen(function*() {
          const store = yield* fresh
          yield* store.createLead(TENANT_A, newKey(), decodeLead(lead()))
          yield* store.reset
          expect(yield* store.records).toEqual({ contacts: [], leads: [], appointments: [], idempotency: [] })
        }))
    })
  })
}
