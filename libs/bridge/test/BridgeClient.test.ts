/**
 * The client over real TLS on loopback, on both transports × both credential
 * kinds: connecting, receipts (Operation rules 1–6), the answer matrix of
 * "Errors", input validation (Operation rule 7) and write keys on retries.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Option } from "effect"
import { gzipSync } from "node:zlib"
import type { Client } from "./support/Harness.js"
import * as Harness from "./support/Harness.js"
import * as Drive from "./support/Drive.js"
import { at } from "./support/FakeBridge.js"
import * as Samples from "./support/Samples.js"

const HEX64 = /^[0-9a-f]{64}$/

/** The Retry-After a failure carries, in milliseconds (null when none or not Transient). */
const retryAfterMillis = (error: { readonly _tag: string }): number | null =>
  "retryAfter" in error && Option.isOption(error.retryAfter)
    ? Option.getOrNull(Option.map(error.retryAfter as Option.Option<Duration.Duration>, Duration.toMillis))
    : null

const capabilities = (operations: ReadonlyArray<string>, closes = true, version = "svc.crm.v1") => ({
  contract_version: version,
  operations,
  booking_closes_availability: closes
})

const slot = (start: string, end: string, timezone = "America/New_York") => ({ start, end, timezone })

const booked = (overrides: Record<string, unknown> = {}) => ({
  id: "appt-1",
  confirmed: true,
  start: Samples.appointment.start,
  end: Samples.appointment.end,
  timezone: "America/New_York",
  ...overrides
})

type Call = (client: Client) => Effect.Effect<unknown, unknown>
const search: Call = (c) => c.contactsSearch({ phone: "+15550100042", email: "" })
const upsert: Call = (c) => c.contactsUpsert(Samples.contact)
const availability: Call = (c) => c.availabilityList(Samples.window)
const book: Call = (c) => c.appointmentsCreate(Samples.appointment)
const createLead: Call = (c) => c.leadsCreate(Samples.lead)
const caps: Call = (c) => c.capabilities()

/** Answers that are not receipts: each must be a Permanent invalid_receipt, never a success. */
const INVALID_RECEIPTS: ReadonlyArray<readonly [string, Call, unknown]> = [
  ["Operation rule 1: capabilities with another contract version is invalid", caps, capabilities(["contacts.upsert", "leads.create"], false, "svc.crm.v2")],
  ["Operation rule 1: capabilities without contacts.upsert is invalid", caps, capabilities(["leads.create"])],
  ["Operation rule 1: capabilities without leads.create or appointments.create is invalid", caps, capabilities(["contacts.upsert"])],
  ["Operation rule 1: availability.list advertised without appointments.create is invalid", caps, capabilities(["contacts.upsert", "leads.create", "availability.list"])],
  ["Operation rule 1: availability.list advertised with booking_closes_availability false is invalid", caps, capabilities(["contacts.upsert", "appointments.create", "availability.list"], false)],
  ["Operation rule 1: an operation name outside the contract is invalid", caps, capabilities(["contacts.upsert", "leads.create", "contacts.delete"])],
  ["Operation rule 2: a search match without an id is never trusted", search, { contact: { full_name: "Invented" } }],
  ["Operation rule 2: a search match with a blank id is never trusted", search, { contact: { id: "  " } }],
  ["Operation rule 2: a search answer without contact is invalid", search, {}],
  ["Operation rule 3: is_new as a string (\"false\") is invalid", upsert, { id: "contact-1", is_new: "false" }],
  ["Operation rule 3: an upsert receipt with a blank id is invalid", upsert, { id: " ", is_new: false }],
  ["Operation rule 3: an upsert receipt without is_new is invalid", upsert, { id: "contact-1" }],
  [
    "Operation rule 4: more than 50 slots is invalid",
    availability,
    { slots: Array.from({ length: 51 }, (_, i) => slot(`2026-03-02T09:${String(i).padStart(2, "0")}:00-05:00`, "2026-03-02T10:00:00-05:00")) }
  ],
  ["Operation rule 4: a slot outside the requested interval is invalid", availability, { slots: [slot("2026-03-02T17:30:00-05:00", "2026-03-02T18:30:00-05:00")] }],
  ["Operation rule 4: a slot whose end is not after its start is invalid", availability, { slots: [slot("2026-03-02T10:00:00-05:00", "2026-03-02T10:00:00-05:00")] }],
  ["Operation rule 8: a slot timestamp without an explicit offset is invalid", availability, { slots: [slot("2026-03-02T10:00:00", "2026-03-02T11:00:00-05:00")] }],
  ["Operation rule 8: a slot with a non-IANA timezone is invalid", availability, { slots: [slot("2026-03-02T10:00:00-05:00", "2026-03-02T11:00:00-05:00", "+05:00")] }],
  ["Operation rule 5: an unconfirmed result (confirmed: false) is a failed booking", book, booked({ confirmed: false })],
  ["Operation rule 5: confirmed as the string \"true\" is a failed booking", book, booked({ confirmed: "true" })],
  ["Operation rule 5: a shifted start is a failed booking", book, booked({ start: "2026-03-02T09:30:00-05:00" })],
  ["Operation rule 5: a shifted end is a failed booking", book, booked({ end: "2026-03-02T10:30:00-05:00" })],
  ["Operation rule 5: an empty ID is a failed booking", book, booked({ id: "" })],
  ["Operation rule 5: a missing timestamp is a failed booking", book, booked({ end: undefined })],
  ["Operation rule 5: a receipt timestamp without an offset is a failed booking", book, booked({ start: "2026-03-02T09:00:00" })],
  ["Operation rule 5: an invalid time zone is a failed booking", book, booked({ timezone: "Mars/Olympus_Mons" })],
  ["Operation rule 6: a generic acknowledgement such as ok:true is not a receipt", createLead, { ok: true }],
  ["Operation rule 6: a lead receipt with a blank id is not a receipt", createLead, { id: "" }],
  ["Errors: a bare acknowledgement ({}) on 2xx is not success", upsert, {}],
  ["Errors: a JSON array on 2xx is not a receipt", upsert, [{ id: "contact-1", is_new: true }]],
  ["Errors: a JSON string on 2xx is not a receipt", createLead, "ok"]
]

layer(Harness.layer)("BridgeClient", (it) => {
  for (const spec of Harness.MATRIX) {
    describe(`${spec.transport} transport × ${spec.auth}`, () => {
      it.effect("What the service does: connecting runs the capabilities check only — one capabilities request, no writes", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const result = yield* client.connect()
          expect(result.contract_version).toBe("svc.crm.v1")
          expect(fake.requests.map((r) => r.operation)).toEqual(["capabilities"])
          expect(fake.requests[0]!.headers["idempotency-key"]).toBeUndefined()
        }))

      it.effect("Endpoints: every operation answers its receipt when the bridge follows the contract", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          expect(yield* client.capabilities()).toMatchObject({ booking_closes_availability: true })
          expect(yield* client.contactsSearch({ phone: "+15550100042", email: "" })).toEqual({ contact: null })
          expect(yield* client.contactsUpsert(Samples.contact)).toEqual({ id: "contact-1", is_new: true })
          expect(yield* client.availabilityList(Samples.window)).toEqual({ slots: [] })
          expect(yield* client.appointmentsCreate(Samples.appointment)).toMatchObject({ id: "appt-1", confirmed: true })
          expect(yield* client.leadsCreate(Samples.lead)).toEqual({ id: "lead-1" })
          expect(fake.requests.map((r) => r.operation)).toEqual([
            "capabilities",
            "contacts.search",
            "contacts.upsert",
            "availability.list",
            "appointments.create",
            "leads.create"
          ])
        }))

      it.effect("Common body fields: every request carries tenant_id and contract_version; writes carry the same 64-hex key in body and Idempotency-Key header; reads carry none", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          yield* client.contactsSearch({ phone: "", email: "ada@example.com" })
          yield* client.contactsUpsert(Samples.contact)
          yield* client.appointmentsCreate(Samples.appointment)
          yield* client.leadsCreate(Samples.lead)
          for (const recorded of fake.requests) {
            const body = spec.transport === "rest" ? recorded.json : at(recorded.json, "params", "arguments")
            expect(at(body, "tenant_id")).toBe(Harness.TENANT)
            expect(at(body, "contract_version")).toBe("svc.crm.v1")
            const key = at(body, "idempotency_key")
            if (recorded.operation === "contacts.search") {
              expect(key).toBeUndefined()
              expect(recorded.headers["idempotency-key"]).toBeUndefined()
            } else {
              expect(key).toMatch(HEX64)
              expect(recorded.headers["idempotency-key"]).toBe(key)
            }
          }
        }))

      for (const [name, call, receipt] of INVALID_RECEIPTS) {
        it.effect(`${name} — Permanent, never a receipt`, () =>
          Effect.gen(function*() {
            const { client, fake } = yield* Harness.client(spec)
            fake.scripts.push({ receipt })
            const error = yield* Effect.flip(call(client))
            expect(error).toMatchObject({ _tag: "Permanent", kind: "invalid_receipt", status: 200 })
          }))
      }

      it.effect("Operation rule 2: only the id of a search match is kept; nothing else the bridge says is trusted", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ receipt: { contact: { id: "c-7", full_name: "Invented Name", phones: ["+1"] } } })
          expect(yield* client.contactsSearch({ phone: "+15550100042", email: "" })).toEqual({ contact: { id: "c-7" } })
        }))

      it.effect("Operation rule 4: the service sorts and deduplicates slots by instant", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({
            receipt: {
              slots: [
                slot("2026-03-02T11:00:00-05:00", "2026-03-02T12:00:00-05:00"),
                slot("2026-03-02T09:00:00-05:00", "2026-03-02T10:00:00-05:00"),
                slot("2026-03-02T14:00:00Z", "2026-03-02T15:00:00Z", "UTC"),
                { ...slot("2026-03-02T11:00:00-05:00", "2026-03-02T12:00:00-05:00"), service_id: "ignored" }
              ]
            }
          })
          const { slots } = yield* client.availabilityList(Samples.window)
          expect(slots).toEqual([
            slot("2026-03-02T09:00:00-05:00", "2026-03-02T10:00:00-05:00"),
            slot("2026-03-02T11:00:00-05:00", "2026-03-02T12:00:00-05:00")
          ])
        }))

      it.effect("Operation rule 5: a receipt with the exact requested instants at another offset is a confirmed booking", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ receipt: booked({ start: "2026-03-02T14:00:00Z", end: "2026-03-02T15:00:00.000Z", timezone: "UTC" }) })
          expect(yield* client.appointmentsCreate(Samples.appointment)).toMatchObject({ id: "appt-1", confirmed: true })
        }))

      it.effect("Versioning rule 2: compatible additive fields in a receipt are accepted", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ receipt: { id: "contact-9", is_new: false, crm_url: "https://crm.example/9" } })
          expect(yield* client.contactsUpsert(Samples.contact)).toEqual({ id: "contact-9", is_new: false })
        }))

      it.effect("Errors: 409 is a conflict — Conflict, no booking, no automatic retry even under the post-call policy", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 409, body: "{\"error\":\"slot taken\"}" } })
          const error = yield* Effect.flip(client.appointmentsCreate(Samples.appointment, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Conflict", operation: "appointments.create", status: 409 })
          expect(fake.requests).toHaveLength(1)
        }))

      it.effect("Errors: 429 is transient and carries Retry-After (7 s)", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 429, headers: { "retry-after": "7" } } })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
          expect(error).toMatchObject({ _tag: "Transient", status: 429 })
          expect(retryAfterMillis(error)).toBe(7_000)
        }))

      it.effect("Limits: Retry-After honored up to 5 minutes — a 503 asking for an hour carries 5 minutes", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 503, headers: { "retry-after": "3600" } } })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Transient", status: 503 })
          expect(retryAfterMillis(error)).toBe(300_000)
        }))

      it.effect("Errors: Retry-After as an HTTP-date is read relative to the clock", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          // An HTTP-date has whole seconds: ask for the first whole second 42 s or more from now.
          const now = yield* Clock.currentTimeMillis
          const wake = Math.ceil((now + 42_000) / 1000) * 1000
          fake.scripts.push({ raw: { status: 503, headers: { "retry-after": new Date(wake).toUTCString() } } })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Transient" })
          expect(retryAfterMillis(error)).toBe(wake - now)
        }))

      it.effect("Errors: 5xx is transient — 500 without Retry-After", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 500, body: "<html>Internal</html>" } })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
          expect(error).toMatchObject({ _tag: "Transient", status: 500 })
          expect(retryAfterMillis(error)).toBeNull()
          // Remote error bodies are never shown verbatim (Errors rule 1).
          expect(error.message).not.toContain("Internal")
        }))

      it.effect("Errors: other 4xx is a permanent configuration or data failure (400, 404, 422)", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          for (const status of [400, 404, 422]) {
            fake.scripts.push({ raw: { status, body: "{\"error\":\"secret detail from the bridge\"}" } })
            const error = yield* Effect.flip(client.leadsCreate(Samples.lead, { policy: "post-call" }))
            expect(error).toMatchObject({ _tag: "Permanent", kind: "rejected", status })
            expect(error.message).not.toContain("secret detail")
          }
          expect(fake.requests).toHaveLength(3)
        }))

      it.effect("Errors: redirects are permanent and are not followed", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          for (const status of [301, 302, 307, 308]) {
            fake.scripts.push({ raw: { status, headers: { location: `${fake.origin}/crm/v1/contacts/upsert` } } })
          }
          for (const status of [301, 302, 307, 308]) {
            const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
            expect(error).toMatchObject({ _tag: "Permanent", kind: "redirect", status })
          }
          expect(fake.requests).toHaveLength(4)
        }))

      it.effect("Transport rules: responses are uncompressed — a gzip answer is Permanent", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({
            raw: {
              status: 200,
              headers: { "content-type": "application/json", "content-encoding": "gzip" },
              body: gzipSync(JSON.stringify({ id: "contact-1", is_new: true }))
            }
          })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "encoding" })
        }))

      it.effect("Errors: malformed JSON on 2xx is rejected and is not a confirmed write", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 200, headers: { "content-type": "application/json" }, body: "{\"id\": \"lead-1\"" } })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "malformed_json", status: 200 })
        }))

      it.effect("Errors: an empty body on 2xx is not success", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 200, headers: { "content-type": "application/json" } } })
          fake.scripts.push({ raw: { status: 204 } })
          for (let i = 0; i < 2; i++) {
            const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
            expect(error).toMatchObject({ _tag: "Permanent", kind: "malformed_json" })
          }
        }))

      it.effect("Limits: response body size 1 MiB — a larger answer is Permanent and never a receipt", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const big = JSON.stringify({ id: "lead-1", padding: "x".repeat(1024 * 1024) })
          fake.scripts.push({ raw: { status: 200, headers: { "content-type": "application/json" }, body: big } })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "egress_refused" })
        }))

      it.effect("Limits: request body size 1 MiB — a larger request is refused and not sent", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const error = yield* Effect.flip(client.leadsCreate({ ...Samples.lead, notes: "n".repeat(1024 * 1024) }))
          expect(error).toMatchObject({ _tag: "Permanent" })
          expect(fake.requests).toHaveLength(0)
        }))

      it.effect("Operation rule 7: an appointment timestamp without an offset is refused and not sent", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const error = yield* Effect.flip(client.appointmentsCreate({ ...Samples.appointment, start: "2026-03-02T09:00:00" }))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "invalid_input", status: null, operation: "appointments.create" })
          expect(error.message).toContain("appointment.start")
          expect(fake.requests).toHaveLength(0)
        }))

      it.effect("Operation rule 7: an appointment whose end is not after its start is refused and not sent", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const error = yield* Effect.flip(
            client.appointmentsCreate({ ...Samples.appointment, end: Samples.appointment.start })
          )
          expect(error).toMatchObject({ _tag: "Permanent", kind: "invalid_input" })
          expect(fake.requests).toHaveLength(0)
        }))

      it.effect("Contact: a contact upsert needs at least one usable phone or email — refused and not sent", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const error = yield* Effect.flip(client.contactsUpsert({ ...Samples.contact, phones: [" "], emails: [] }))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "invalid_input", operation: "contacts.upsert" })
          expect(fake.requests).toHaveLength(0)
        }))

      it.effect("Serialization rule 2: an Optional field is never sent as null — absent fields are omitted, and service_id: \"\" (\"Omitted when empty\") is left out, not refused", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          const { location: _location, ...withoutLocation } = Samples.appointment
          yield* client.appointmentsCreate({ ...withoutLocation, service_id: "" })
          const body = spec.transport === "rest" ? fake.requests[0]!.json : at(fake.requests[0]!.json, "params", "arguments")
          const sent = at(body, "appointment") as Record<string, unknown>
          expect(Object.keys(sent)).not.toContain("location")
          expect(Object.keys(sent)).not.toContain("service_id")
          expect(sent["slot_text"]).toBe(Samples.appointment.slot_text)
        }))

      it.effect("Errors: 429 or 5xx — post-call delivery retries with the same idempotency key until the receipt", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 503 } }, { raw: { status: 429, headers: { "retry-after": "30" } } })
          const exit = yield* Drive.run(client.appointmentsCreate(Samples.appointment, { policy: "post-call" }))
          expect(exit).toEqual(Exit.succeed(expect.objectContaining({ id: "appt-1" })))
          expect(fake.requests).toHaveLength(3)
          const keys = fake.requests.map((r) => r.headers["idempotency-key"])
          expect(new Set(keys).size).toBe(1)
          const bodyKeys = fake.requests.map((r) =>
            at(spec.transport === "rest" ? r.json : at(r.json, "params", "arguments"), "idempotency_key")
          )
          expect(bodyKeys).toEqual(keys)
        }))

      it.effect("Errors rule 3: in-call operations do not wait through the post-call retry schedule — one exchange, then Transient", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          fake.scripts.push({ raw: { status: 503 } })
          const error = yield* Effect.flip(client.contactsSearch({ phone: "+15550100042", email: "" }, { policy: "in-call" }))
          expect(error).toMatchObject({ _tag: "Transient", status: 503 })
          expect(fake.requests).toHaveLength(1)
        }))

      it.effect("Idempotency rule 2: mutable descriptions do not change the key sent for an appointment or a call-based lead", () =>
        Effect.gen(function*() {
          const { client, fake } = yield* Harness.client(spec)
          yield* client.appointmentsCreate(Samples.appointment)
          yield* client.appointmentsCreate({ ...Samples.appointment, notes: "Back door", title: "New title", slot_text: "nine-ish" })
          yield* client.leadsCreate(Samples.lead)
          yield* client.leadsCreate({ ...Samples.lead, summary: "Changed", notes: "Changed", urgency: "low" })
          const keys = fake.requests.map((r) => r.headers["idempotency-key"])
          expect(keys[0]).toBe(keys[1])
          expect(keys[2]).toBe(keys[3])
          expect(keys[0]).not.toBe(keys[2])
        }))
    })
  }
})
