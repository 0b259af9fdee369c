import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Schedules } from "@crm-relay/bridge"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Eventually } from "@crm-relay/testing"
import { Clock, Effect, Fiber, Schedule, TestClock } from "effect"
import * as S from "./support/ConnectionsServer.js"
import { adminHeaders, replica, request, start } from "./support/TestServer.js"

const contact = {
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

// Monday 3 March 2031 in New York: the bridge's calendar is open 09:00–17:00.
const window = {
  start: "2031-03-03T08:00:00-05:00",
  end: "2031-03-03T18:00:00-05:00",
  timezone: "America/New_York",
  windows: [],
  slot_minutes: 60,
  job_type: "Boiler repair"
}

const appointment = (contactId: string, hour: number) => ({
  contact_external_id: contactId,
  timezone: "America/New_York",
  start: `2031-03-03T${String(hour).padStart(2, "0")}:00:00-05:00`,
  end: `2031-03-03T${String(hour + 1).padStart(2, "0")}:00:00-05:00`,
  slot_text: "Monday",
  job_type: "Boiler repair",
  address: "12 Analytical Row",
  notes: "",
  title: "Boiler repair",
  source: "Receptionist (phone)"
})

/** An in-call request to the server at `base` (the context's server when not given). */
const call = (accountId: string, route: string, body: unknown, base?: string) =>
  S.admin("POST", `/v1/accounts/${accountId}/tenants/${S.TENANT.tenantId}/${route}`, body, base)

/** A live account whose tenant t-1 is connected over `transport` with `auth`. */
const connected = (transport: "rest" | "mcp", auth: "api_key" | "oauth" = "api_key") =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.ReferenceBridge
    // Each test starts from an empty bridge (records and calendar).
    yield* bridge.control.reset
    const id = yield* S.account("live")
    const answer = yield* S.admin("PUT", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`, S.form(bridge, transport, auth))
    expect(answer.status).toBe(200)
    return id
  })

/** Upserts a contact in-call and returns its id at the bridge. */
const contactId = (accountId: string, input: typeof contact = contact, base?: string) =>
  Effect.map(call(accountId, "contacts/upsert", { contact: input }, base), (answer) => (answer.json as { id: string }).id)

/** Another server instance over the same database (own pool on PostgreSQL, own Vault cache and clients). */
const secondInstance = Effect.flatMap(replica(S.layerServer), (server) => Effect.map(start(server), (urls) => urls.admin))

layer(S.Live)("in-call API", (it) => {
  for (const transport of ["rest", "mcp"] as const) {
    it.effect(`In-call API over ${transport}: contacts/search, contacts/upsert, availability and appointments answer 200 {ok: true, ...receipt}, one bridge exchange each`, () =>
      Effect.gen(function*() {
        const id = yield* connected(transport)
        const mark = yield* S.mark
        const none = yield* call(id, "contacts/search", { phone: "+1 555 010 0042" })
        expect([none.status, none.json]).toEqual([200, { ok: true, contact: null }])
        const upsert = yield* call(id, "contacts/upsert", { contact })
        expect(upsert.status).toBe(200)
        expect(upsert.json).toMatchObject({ ok: true, is_new: true })
        const contactId = (upsert.json as { id: string }).id
        expect((yield* call(id, "contacts/search", { phone: "", email: "ada@example.com" })).json).toEqual({ ok: true, contact: { id: contactId } })
        const slots = yield* call(id, "availability", { window })
        expect(slots.status).toBe(200)
        expect((slots.json as { ok: boolean; slots: Array<unknown> }).slots).toHaveLength(8)
        const booked = yield* call(id, "appointments", { appointment: appointment(contactId, 9) })
        expect([booked.status, booked.json]).toEqual([200, {
          ok: true,
          id: expect.any(String),
          confirmed: true,
          start: "2031-03-03T09:00:00-05:00",
          end: "2031-03-03T10:00:00-05:00",
          timezone: "America/New_York"
        }])
        expect((yield* S.bridgeRequestsSince(mark)).map((r) => [r.transport, r.operation])).toEqual([
          [transport, "contacts.search"],
          [transport, "contacts.upsert"],
          [transport, "contacts.search"],
          [transport, "availability.list"],
          [transport, "appointments.create"]
        ])
      }))
  }

  for (const transport of ["rest", "mcp"] as const) {
    it.effect(`Serialization rule 2 over ${transport}: "A field marked Optional is omitted when absent. It is never sent as null." — an empty postal_code ("Omitted when no postal code is supplied") and service_id ("Omitted when empty") are not sent as "" nor refused`, () =>
      Effect.gen(function*() {
        const id = yield* connected(transport)
        const mark = yield* S.mark
        const upsert = yield* call(id, "contacts/upsert", { contact: { ...contact, postal_code: "" } })
        expect([upsert.status, upsert.json]).toEqual([200, { ok: true, id: expect.any(String), is_new: true }])
        const contactId = (upsert.json as { id: string }).id
        const booked = yield* call(id, "appointments", { appointment: { ...appointment(contactId, 10), service_id: "" } })
        expect([booked.status, booked.json]).toMatchObject([200, { ok: true, confirmed: true }])
        const sent = yield* S.bridgeRequestsSince(mark)
        expect(sent.map((r) => r.operation)).toEqual(["contacts.upsert", "appointments.create"])
        expect(JSON.stringify(sent[0]!.body)).not.toContain("postal_code")
        expect(JSON.stringify(sent[1]!.body)).not.toContain("service_id")
      }))
  }

  it.effect("Operation rule 5: a taken slot answers 200 {ok: false, reason: \"conflict\"}", () =>
    Effect.gen(function*() {
      const id = yield* connected("rest")
      const ada = yield* contactId(id)
      const bob = yield* contactId(id, { ...contact, full_name: "Bob", phones: ["+1 555 010 0077"], emails: [] })
      expect((yield* call(id, "appointments", { appointment: appointment(ada, 14) })).json).toMatchObject({ ok: true })
      const taken = yield* call(id, "appointments", { appointment: appointment(bob, 14) })
      expect([taken.status, taken.json]).toEqual([200, { ok: false, reason: "conflict", message: expect.any(String) }])
    }))

  it.effect("Refusing over MCP: a taken slot refused at HTTP 200 with isError and {status: 409} answers {ok: false, reason: \"conflict\"}, a bare isError {ok: false, reason: \"rejected\"}; neither promises a booking", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* connected("mcp")
      const ada = yield* contactId(id)
      const bob = yield* contactId(id, { ...contact, full_name: "Bob", phones: ["+1 555 010 0077"], emails: [] })
      expect((yield* call(id, "appointments", { appointment: appointment(ada, 11) })).json).toMatchObject({ ok: true })
      for (const [fault, reason] of [[Faults.mcpIsError(409), "conflict"], [Faults.mcpIsError(), "rejected"]] as const) {
        yield* bridge.control.setFault(fault, { operation: "appointments.create" })
        const taken = yield* call(id, "appointments", { appointment: appointment(bob, 11) })
        // Exactly the failure shape: no id, no confirmed, no instants.
        expect([taken.status, taken.json]).toEqual([200, { ok: false, reason, message: expect.any(String) }])
        expect((taken.json as { message: string }).message).not.toContain("Injected")
      }
      expect((yield* bridge.control.records).appointments).toHaveLength(1)
    }))

  it.effect("Operation rule 5: an invalid receipt answers {ok: false, reason: \"rejected\"} and no booking is reported", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const id = yield* connected("mcp")
      const ada = yield* contactId(id)
      yield* bridge.control.setFault(Faults.invalidReceipt("shifted_end"), { operation: "appointments.create" })
      const answer = yield* call(id, "appointments", { appointment: appointment(ada, 15) })
      expect([answer.status, answer.json]).toEqual([200, { ok: false, reason: "rejected", message: expect.any(String) }])
    }))

  it.effect("not_configured: a demo or sandbox account, a tenant without connection, an operation the bridge does not offer — no bridge traffic", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const id = yield* connected("rest")
      const mark = yield* S.mark
      for (const mode of ["demo", "sandbox"] as const) {
        const other = yield* S.account(mode)
        expect((yield* call(other, "contacts/upsert", { contact })).json).toMatchObject({ ok: false, reason: "not_configured" })
      }
      const bare = yield* S.account("live")
      expect((yield* call(bare, "contacts/search", { phone: "1" })).json).toMatchObject({ ok: false, reason: "not_configured" })
      yield* sql`UPDATE connections SET capabilities = ${
        JSON.stringify({ contract_version: "svc.crm.v1", operations: ["capabilities", "contacts.upsert", "leads.create"], booking_closes_availability: false })
      }::jsonb WHERE account_id = ${id}`
      expect((yield* call(id, "availability", { window })).json).toMatchObject({ ok: false, reason: "not_configured" })
      expect(yield* S.bridgeRequestsSince(mark)).toEqual([])
    }))

  it.effect("every input mistake is one shape, {ok: false, reason, message} with 200, never a 400 the agent cannot act on mid-call: a wrong shape, a body that is not JSON or too large and input the contract refuses are \"rejected\" naming the field, an unknown account \"not_configured\"; nothing is sent", () =>
    Effect.gen(function*() {
      const id = yield* connected("rest")
      const mark = yield* S.mark
      const rejected = (message: unknown) => [200, { ok: false, reason: "rejected", message }]
      const missing = yield* call(id, "contacts/upsert", {})
      expect([missing.status, missing.json]).toEqual(rejected("contact is required."))
      const wrongType = yield* call(id, "appointments", { appointment: { ...appointment("c", 9), start: 9 } })
      expect([wrongType.status, wrongType.json]).toEqual(rejected(expect.stringContaining("appointment.start")))
      const noOffset = yield* call(id, "appointments", { appointment: { ...appointment("c", 9), start: "2031-03-03T09:00:00" } })
      expect([noOffset.status, noOffset.json]).toEqual(rejected(expect.any(String)))
      const notJson = yield* call(id, "contacts/search", "{\"phone\": ")
      expect([notJson.status, notJson.json]).toEqual(rejected("The request body is not valid JSON."))
      const base = yield* S.adminUrl
      const plainText = yield* request("POST", `${base}/v1/accounts/${id}/tenants/${S.TENANT.tenantId}/availability`, {
        headers: { ...adminHeaders, "content-type": "text/plain" },
        body: "{}"
      })
      expect([plainText.status, plainText.json]).toEqual(rejected("Content-Type must be application/json."))
      const tooLarge = yield* call(id, "contacts/search", { phone: "1".repeat(70 * 1024) })
      expect([tooLarge.status, tooLarge.json]).toEqual(rejected(expect.stringContaining("larger than 65536 bytes")))
      expect(yield* S.bridgeRequestsSince(mark)).toEqual([])
      const unknown = yield* call("0f8fad5b-d9cb-469f-a165-70867728950e", "contacts/upsert", { contact })
      expect([unknown.status, unknown.json]).toEqual([
        200,
        { ok: false, reason: "not_configured", message: "No account with id 0f8fad5b-d9cb-469f-a165-70867728950e exists." }
      ])
      // Only the deployment's own mistakes stay HTTP errors: a wrong admin token, a path that is not a route.
      const noToken = yield* request("POST", `${base}/v1/accounts/${id}/tenants/${S.TENANT.tenantId}/contacts/search`, {
        headers: { "content-type": "application/json" },
        body: "{}"
      })
      expect(noToken.status).toBe(401)
      // Other routes of the internal API keep the 400 Error object.
      const otherRoute = yield* S.admin("POST", "/v1/accounts", {})
      expect([otherRoute.status, otherRoute.json]).toEqual([400, { error: expect.stringContaining("name") }])
    }))

  it.scoped("Errors rule 3: a bridge slower than the in-call budget answers {ok: false, reason: \"timeout\"} once the budget runs out", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      // A server of this test, so its handlers run on this test's clock.
      const base = yield* secondInstance
      const id = yield* connected("rest")
      const ada = yield* contactId(id, contact, base)
      yield* bridge.control.setFault(Faults.delay(60_000), { operation: "appointments.create" })
      const started = yield* TestClock.currentTimeMillis
      const pending = yield* Effect.fork(call(id, "appointments", { appointment: appointment(ada, 16) }, base))
      yield* bridge.control.pendingFaults.pipe(
        Effect.filterOrFail((faults) => faults.length === 0),
        Effect.retry(Schedule.spaced("5 millis").pipe(Schedule.upTo(Eventually.HANG_BOUND))),
        Effect.withClock(Clock.make()),
        Effect.orDie
      )
      yield* TestClock.adjust(Schedules.inCallBudget)
      const answer = yield* Fiber.join(pending)
      expect([answer.status, answer.json]).toEqual([200, { ok: false, reason: "timeout", message: expect.any(String) }])
      expect((yield* TestClock.currentTimeMillis) - started).toBe(8_000)
    }))

  describe("rotation keeps every connection working", () => {
    it.scoped("connections set → master-key rotate → in-call calls still work, and a second replica sharing the database decrypts with no restart", () =>
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const replica = yield* secondInstance
        const rest = yield* connected("rest", "api_key")
        const mcp = yield* S.account("live")
        expect((yield* S.admin("PUT", `/v1/accounts/${mcp}/connections/${S.TENANT.tenantId}`, S.form(bridge, "mcp", "oauth"))).status).toBe(200)
        // The replica has opened both connections (and cached the data key) before the rotation.
        for (const id of [rest, mcp]) {
          expect((yield* call(id, "contacts/search", { phone: "1" }, replica)).json).toMatchObject({ ok: true })
        }

        const rotated = yield* S.admin("POST", "/v1/master-key/rotate")
        expect(rotated.status).toBe(200)
        expect((rotated.json as { resealed: number }).resealed).toBeGreaterThanOrEqual(2)

        for (const base of [undefined, replica]) {
          for (const id of [rest, mcp]) {
            const answer = yield* call(id, "contacts/upsert", { contact }, base)
            expect([answer.status, (answer.json as { ok: boolean }).ok]).toEqual([200, true])
          }
        }
        // A connection set on the replica after the rotation (under the new key) works on the first instance.
        const late = yield* S.account("live")
        expect((yield* S.admin("PUT", `/v1/accounts/${late}/connections/${S.TENANT.tenantId}`, S.form(bridge, "rest", "oauth"), replica)).status).toBe(200)
        expect((yield* call(late, "contacts/search", { phone: "1" })).json).toMatchObject({ ok: true })
      }))
  })
})
