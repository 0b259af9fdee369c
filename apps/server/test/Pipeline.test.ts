/**
 * The call pipeline end to end on loopback: outcome → CRM push at the
 * reference bridge (real TLS, real egress) → signed event at an HTTPS
 * receiver, verified with the `standardwebhooks` package. Runs on PGlite, or
 * on PostgreSQL when DATABASE_URL is set.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Events } from "@crm-relay/contract"
import { Faults } from "@crm-relay/reference-bridge"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { Database, TestDatabase } from "@crm-relay/store"
import { PRIVATE_HOST } from "./support/LoopbackEgress.js"
import { admin, eventually, layer as pipelineLayer, Pipeline, serverLayer, TENANTS } from "./support/Pipeline.js"
import { request } from "./support/TestServer.js"

type Json = Record<string, any>

const IDEMPOTENCY_KEY = /^[0-9a-f]{64}$/

/** A live (or demo/sandbox) account with a key, optionally a bridge connection, subscriptions and its signing secret. */
const account = (options: {
  readonly mode?: "live" | "demo" | "sandbox"
  readonly connect?: "main" | "other" | "leadOnly" | "none"
  readonly subscribe?: ReadonlyArray<{ readonly event: string; readonly targetUrl?: string }>
} = {}) =>
  Effect.gen(function*() {
    const p = yield* Pipeline
    const created = yield* admin("POST", "/v1/accounts", { name: "Pipeline test", mode: options.mode ?? "live" })
    expect(created.status).toBe(201)
    const accountId = (created.json as Json)["id"] as string
    const key = ((yield* admin("POST", `/v1/accounts/${accountId}/keys`)).json as Json)["key"] as string
    const connect = options.connect ?? "main"
    const tenant = connect === "leadOnly" ? TENANTS.leadOnly : connect === "other" ? TENANTS.other : TENANTS.main
    if (connect !== "none") {
      const bridge = connect === "leadOnly" ? p.leadOnlyBridge : p.bridge
      const set = yield* admin("PUT", `/v1/accounts/${accountId}/connections/${tenant.tenantId}`, {
        transport: "rest",
        url: bridge.restBaseUrl,
        auth: { type: "api_key", key: tenant.apiKey }
      })
      expect(set.status).toBe(200)
    }
    const hookPath = `/hook/${randomUUID()}`
    for (const subscription of options.subscribe ?? [{ event: "all" }]) {
      const answer = yield* request("POST", `${p.public}/subscribe`, {
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ targetUrl: subscription.targetUrl ?? p.receiver.url(hookPath), event: subscription.event })
      })
      expect(answer.status).toBe(201)
    }
    const secret = ((yield* admin("GET", `/v1/accounts/${accountId}/signing-secret`)).json as Json)["secret"] as string
    return { accountId, tenantId: tenant.tenantId, key, secret, hookPath }
  })

const outcome = (owner: { readonly accountId: string; readonly tenantId: string }, extra: Json = {}): Json => ({
  account_id: owner.accountId,
  tenant_id: owner.tenantId,
  classification: "lead",
  source: "Acme Receptionist (phone)",
  tags: ["inbound", "after-hours"],
  caller: {
    full_name: "Ada Lovelace",
    first_name: "Ada",
    last_name: "Lovelace",
    phones: ["+1 (555) 010-0000"],
    emails: ["Ada@Example.com"],
    address: "1 Analytical Way",
    postal_code: "02139"
  },
  lead: { job_type: "Boiler repair", summary: "No hot water since Monday", notes: "Use the side door.", urgency: "high" },
  ...extra
})

const booking = (status: "booked" | "requested", extra: Json = {}): Json => ({
  status,
  start: "2031-03-03T10:00:00-05:00",
  end: "2031-03-03T11:00:00-05:00",
  timezone: "America/New_York",
  slot_text: "Monday at ten",
  title: "Boiler repair visit",
  notes: "Bring a spare pump.",
  address: "1 Analytical Way",
  job_type: "Boiler repair",
  ...extra
})

const post = (callId: string, body: Json) => admin("POST", `/v1/calls/${encodeURIComponent(callId)}/outcome`, body)

/** The deliveries the receiver got on `path`, verified with the account's secret; fails on a bad signature. */
const verified = (secret: string, path: string) =>
  Effect.map(Pipeline, (p) =>
    p.receiver.received().filter((d) => d.path === path).map((d) => ({
      headers: d.headers,
      event: new Webhook(secret).verify(d.body, d.headers) as Json
    })))

/** What the bridge received for a tenant (by the body's tenant_id: faults answer before authentication), apart from capabilities checks. */
const bridgeWrites = (which: "bridge" | "leadOnlyBridge", tenantId: string) =>
  Effect.flatMap(Pipeline, (p) =>
    Effect.map(p[which].control.received, (all) =>
      all.filter((r) => (r.body as Json | undefined)?.["tenant_id"] === tenantId && r.operation !== "capabilities")))

/** The CRM contact id the push's upsert receipt holds. */
const upsertedId = (push: Json): string =>
  (push["receipts"] as Array<Json>).find((r) => r["operation"] === "contacts.upsert")!["receipt"]["id"]

const pushOf = (callId: string) =>
  Effect.map(admin("GET", `/v1/calls/${encodeURIComponent(callId)}/outcome`), (a) => (a.json as Json)["push"] as Json | null)

const settled = (callId: string) => eventually(pushOf(callId), (push) => push !== null && push["status"] !== "pending")

describe("call pipeline, end to end", () => {
  layer(pipelineLayer(), { excludeTestServices: true })((it) => {
    it.effect("outcome → contacts.upsert + leads.create at the bridge → signed lead event at the receiver (standardwebhooks)", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        const accepted = yield* post(callId, outcome(owner))
        expect(accepted.status).toBe(202)
        expect(accepted.json).toMatchObject({ call_id: callId, duplicate: false, route: "push" })

        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const records = yield* p.bridge.control.records
        const contact = { id: upsertedId((yield* settled(callId))!) }
        expect(records.contacts.map((c) => c.id)).toContain(contact.id)
        const lead = records.leads.find((l) => l.lead.call_id === callId)!
        expect(lead.lead).toMatchObject({ job_type: "Boiler repair", summary: "No hot water since Monday", source: "Acme Receptionist (phone)" })

        const event = Schema.decodeUnknownSync(Events.LeadEvent)(delivery!.event)
        expect(event).toMatchObject({
          event: "lead",
          call_id: callId,
          source: "Acme Receptionist (phone)",
          contact: {
            external_id: contact.id,
            full_name: "Ada Lovelace",
            first_name: "Ada",
            last_name: "Lovelace",
            phones: ["+1 (555) 010-0000"],
            emails: ["Ada@Example.com"],
            address: "1 Analytical Way",
            postal_code: "02139"
          },
          job_type: "Boiler repair",
          summary: "No hot water since Monday",
          booked: false
        })
        expect(delivery!.headers["webhook-id"]).toBe(event.id)

        const writes = yield* bridgeWrites("bridge", owner.tenantId)
        const mine = writes.filter((w) => JSON.stringify(w.body).includes(callId))
        expect(mine.map((w) => w.operation)).toEqual(["contacts.upsert", "leads.create"])
        for (const w of mine) {
          expect(w.idempotencyKey).toMatch(IDEMPOTENCY_KEY)
          expect((w.body as Json)["idempotency_key"]).toBe(w.idempotencyKey)
        }
        const push = (yield* settled(callId))!
        expect(push).toMatchObject({ status: "succeeded", attempts: 1, error_class: null })
        expect((push["receipts"] as Array<Json>).map((r) => [r["operation"], r["idempotency_key"]])).toEqual(
          mine.map((w) => [w.operation, w.idempotencyKey])
        )
        // The preview samples the real delivery: only the contact's external id.
        const preview = yield* request("GET", `${p.public}/perform-list`, { headers: { authorization: `Bearer ${owner.key}` } })
        expect((preview.json as Array<Json>)[0]).toMatchObject({ call_id: callId, contact: { external_id: contact.id }, booked: false })
      }))

    it.effect("booking booked in-call: no new write at the bridge; booking event `scheduled` with the in-call appointment id", () =>
      Effect.gen(function*() {
        const owner = yield* account({ subscribe: [{ event: "booking" }] })
        const callId = `call-${randomUUID()}`
        const before = (yield* bridgeWrites("bridge", owner.tenantId)).length
        const accepted = yield* post(callId, outcome(owner, {
          classification: "booking",
          booking: booking("booked", { appointment_external_id: "appt-in-call-1", contact_external_id: "contact-in-call-1" })
        }))
        expect(accepted.json).toMatchObject({ route: "event" })
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const event = Schema.decodeUnknownSync(Events.BookingEvent)(delivery!.event)
        expect(event).toMatchObject({
          event: "booking",
          booked: true,
          contact: { external_id: "contact-in-call-1" },
          appointment: {
            external_id: "appt-in-call-1",
            status: "scheduled",
            start: "2031-03-03T10:00:00-05:00",
            end: "2031-03-03T11:00:00-05:00",
            timezone: "America/New_York",
            slot_text: "Monday at ten",
            title: "Boiler repair visit",
            job_type: "Boiler repair",
            address: "1 Analytical Way"
          }
        })
        expect((yield* bridgeWrites("bridge", owner.tenantId)).length).toBe(before)
      }))

    it.effect("booking requested, bridge supports appointments.create: confirmed → booking event `scheduled` with the CRM's id", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ connect: "other", subscribe: [{ event: "booking" }] })
        const callId = `call-${randomUUID()}`
        yield* post(callId, outcome(owner, { classification: "booking", booking: booking("requested", { start: "2031-03-04T13:00:00-05:00", end: "2031-03-04T14:00:00-05:00" }) }))
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const records = yield* p.bridge.control.records
        const contact = { id: upsertedId((yield* settled(callId))!) }
        const appointment = records.appointments.find((a) => a.appointment.contact_external_id === contact.id)!
        expect(appointment.appointment).toMatchObject({ start: "2031-03-04T13:00:00-05:00", title: "Boiler repair visit" })
        expect(records.leads.filter((l) => l.lead.call_id === callId)).toEqual([])
        const event = Schema.decodeUnknownSync(Events.BookingEvent)(delivery!.event)
        expect(event).toMatchObject({
          booked: true,
          contact: { external_id: contact.id },
          appointment: { external_id: appointment.id, status: "scheduled", start: "2031-03-04T13:00:00-05:00" }
        })
        const writes = yield* bridgeWrites("bridge", owner.tenantId)
        expect(writes.filter((w) => JSON.stringify(w.body).includes(contact.id) || JSON.stringify(w.body).includes(callId)).map((w) => w.operation))
          .toEqual(["contacts.upsert", "appointments.create"])
      }))

    it.effect("Operation rule 5: requested booking answered 409 → never retried; a lead carries the request; event status `requested`", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "all" }] })
        const callId = `call-${randomUUID()}`
        yield* p.bridge.control.setFault(Faults.status(409), { operation: "appointments.create" })
        yield* post(callId, outcome(owner, { classification: "booking", booking: booking("requested", { start: "2031-03-05T09:00:00-05:00", end: "2031-03-05T10:00:00-05:00" }) }))
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const push = (yield* settled(callId))!
        expect(push["status"]).toBe("succeeded")
        const refused = (push["receipts"] as Array<Json>).find((r) => r["operation"] === "appointments.create")!
        expect(refused).toMatchObject({ outcome: "refused", receipt: { error: "Conflict", status: 409 } })
        const records = yield* p.bridge.control.records
        const lead = records.leads.find((l) => l.lead.call_id === callId)!
        expect(lead.lead.notes).toContain("Use the side door.")
        expect(lead.lead.notes).toContain("Requested appointment: Monday at ten (2031-03-05T09:00:00-05:00 to 2031-03-05T10:00:00-05:00, America/New_York).")
        const event = Schema.decodeUnknownSync(Events.BookingEvent)(delivery!.event)
        expect(event).toMatchObject({ booked: false, appointment: { external_id: "", status: "requested", start: "2031-03-05T09:00:00-05:00" } })
        const attempts = (yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => w.operation === "appointments.create" && JSON.stringify(w.body).includes("2031-03-05T09:00:00-05:00"))
        expect(attempts).toHaveLength(1)
      }))

    it.effect("booking requested, bridge without appointments.create (capabilities): a lead carries the request; event `requested`", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ connect: "leadOnly", subscribe: [{ event: "booking" }] })
        const callId = `call-${randomUUID()}`
        yield* post(callId, outcome(owner, { classification: "booking", booking: booking("requested") }))
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const writes = yield* bridgeWrites("leadOnlyBridge", owner.tenantId)
        expect(writes.map((w) => w.operation)).toEqual(["contacts.upsert", "leads.create"])
        const lead = (yield* p.leadOnlyBridge.control.records).leads.find((l) => l.lead.call_id === callId)!
        expect(lead.lead.notes).toContain("Requested appointment: Monday at ten")
        expect(Schema.decodeUnknownSync(Events.BookingEvent)(delivery!.event).appointment).toMatchObject({ status: "requested", external_id: "" })
      }))

    it.effect("demo account → no bridge traffic at all, the lead event is still delivered", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        yield* p.bridge.control.reset
        const owner = yield* account({ mode: "demo", connect: "none", subscribe: [{ event: "lead" }] })
        const demoRefused = yield* admin("PUT", `/v1/accounts/${owner.accountId}/connections/${TENANTS.main.tenantId}`, {
          transport: "rest",
          url: p.bridge.restBaseUrl,
          auth: { type: "api_key", key: TENANTS.main.apiKey }
        })
        expect(demoRefused.status).toBeGreaterThanOrEqual(400)
        const callId = `call-${randomUUID()}`
        const accepted = yield* post(callId, outcome(owner))
        expect(accepted.json).toMatchObject({ route: "event", deliveries: 1 })
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        expect(delivery!.event).toMatchObject({ event: "lead", call_id: callId, contact: { external_id: "" } })
        expect(yield* p.bridge.control.received).toEqual([])
      }))

    it.effect("routing rules: CRM push switched off → no bridge traffic, the event goes out at once", () =>
      Effect.gen(function*() {
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const set = yield* admin("PUT", `/v1/accounts/${owner.accountId}/routing`, { crm_push: false })
        expect(set.json).toEqual({ crm_push: false, classifications: ["lead", "booking"] })
        const before = (yield* bridgeWrites("bridge", owner.tenantId)).length
        const accepted = yield* post(`call-${randomUUID()}`, outcome(owner))
        expect(accepted.json).toMatchObject({ route: "event", reason: "The account's routing rules turn the CRM push off." })
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        expect((yield* bridgeWrites("bridge", owner.tenantId)).length).toBe(before)
      }))

    it.effect("spam → stored, nothing pushed, no event; wrong_number likewise", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "all" }] })
        const before = (yield* bridgeWrites("bridge", owner.tenantId)).length
        for (const classification of ["spam", "wrong_number"]) {
          const callId = `call-${randomUUID()}`
          const accepted = yield* post(callId, outcome(owner, { classification }))
          expect(accepted.status).toBe(202)
          expect(accepted.json).toMatchObject({ route: "store", duplicate: false })
          const stored = yield* admin("GET", `/v1/calls/${callId}/outcome`)
          expect(stored.json).toMatchObject({ classification, route: "store", event: null, push: null })
        }
        yield* Effect.sleep(Duration.millis(300))
        expect(p.receiver.received().filter((d) => d.path === owner.hookPath)).toEqual([])
        expect((yield* bridgeWrites("bridge", owner.tenantId)).length).toBe(before)
      }))

    it.effect("Errors: 429 and 5xx are retried with the same idempotency keys until success; one lead is stored", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        yield* p.bridge.control.setFault(Faults.status(429, { retryAfter: 1 }), { operation: "contacts.upsert" })
        yield* p.bridge.control.setFault(Faults.status(503), { operation: "leads.create", times: 2 })
        yield* p.bridge.control.setFault(Faults.status(502, { afterCommit: true }), { operation: "leads.create" })
        yield* post(callId, outcome(owner))
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        const writes = (yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => JSON.stringify(w.body).includes(callId))
        const upserts = writes.filter((w) => w.operation === "contacts.upsert")
        const leads = writes.filter((w) => w.operation === "leads.create")
        expect(upserts.map((w) => w.status)).toEqual([429, 200])
        expect(leads.map((w) => w.status)).toEqual([503, 503, 502, 200])
        expect(new Set(upserts.map((w) => w.idempotencyKey)).size).toBe(1)
        expect(new Set(leads.map((w) => w.idempotencyKey)).size).toBe(1)
        // Retry-After: 1 was honoured before the second upsert.
        expect(Date.parse(upserts[1]!.at) - Date.parse(upserts[0]!.at)).toBeGreaterThanOrEqual(900)
        const records = yield* p.bridge.control.records
        expect(records.leads.filter((l) => l.lead.call_id === callId)).toHaveLength(1)
        expect(yield* settled(callId)).toMatchObject({ status: "succeeded", attempts: 5 })
      }))

    it.effect("Errors: 409 → never retried; the push stops visibly (listed, Conflict), the lead event still goes out; replay completes it", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        yield* p.bridge.control.setFault(Faults.status(409), { operation: "leads.create" })
        yield* post(callId, outcome(owner))
        const push = (yield* settled(callId))!
        expect(push).toMatchObject({ status: "failed", failure: "stopped", error_class: "Conflict", attempts: 1 })
        expect(push["last_error"]).toContain("leads.create")
        const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        expect(delivery!.event).toMatchObject({ event: "lead", call_id: callId, contact: { external_id: upsertedId(push) } })
        yield* Effect.sleep(Duration.millis(500))
        const leadsSent = (yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => w.operation === "leads.create" && JSON.stringify(w.body).includes(callId))
        expect(leadsSent).toHaveLength(1)

        const listed = yield* admin("GET", `/v1/crm-pushes?status=failed&account=${owner.accountId}`)
        expect(((listed.json as Json)["pushes"] as Array<Json>).map((j) => j["id"])).toEqual([push["id"]])

        const replayed = yield* admin("POST", `/v1/crm-pushes/${push["id"]}/replay`)
        expect(replayed.status).toBe(202)
        expect(replayed.json).toEqual({ id: push["id"], outcome: "queued" })
        const after = yield* eventually(pushOf(callId), (j) => j !== null && j["status"] === "succeeded")
        expect(after).toMatchObject({ replays: 1, error_class: null })
        const writes = (yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => JSON.stringify(w.body).includes(callId))
        // The stored upsert receipt is reused; the lead is sent again with the same key.
        expect(writes.map((w) => w.operation)).toEqual(["contacts.upsert", "leads.create", "leads.create"])
        expect(writes[1]!.idempotencyKey).toBe(writes[2]!.idempotencyKey)
        yield* Effect.sleep(Duration.millis(300))
        expect(p.receiver.received().filter((d) => d.path === owner.hookPath)).toHaveLength(1)
      }))

    it.effect("Errors: an API-key 401 \"requires corrected access\": never replayed; the push stops (Auth) and is listed", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        yield* p.bridge.control.setFault(Faults.status(401), { operation: "leads.create" })
        yield* post(callId, outcome(owner))
        const push = (yield* settled(callId))!
        expect(push).toMatchObject({ status: "failed", failure: "stopped", error_class: "Auth", attempts: 1 })
        yield* Effect.sleep(Duration.millis(300))
        const sent = (yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => w.operation === "leads.create" && JSON.stringify(w.body).includes(callId))
        expect(sent).toHaveLength(1)
        const failed = yield* admin("GET", `/v1/crm-pushes/${push["id"]}`)
        expect(failed.json).toMatchObject({ status: "failed", error_class: "Auth" })
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
      }))

    it.effect("retries end: the job is dead-lettered (Transient), listed, and the event still goes out", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        yield* p.bridge.control.setFault(Faults.status(503), { operation: "leads.create", times: 6 })
        yield* post(callId, outcome(owner))
        const push = (yield* settled(callId))!
        expect(push).toMatchObject({ status: "failed", failure: "dead_lettered", error_class: "Transient", attempts: 6 })
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
      }))

    it.effect("No delivery goes to private networks: the attempt fails without sending and records why", () =>
      Effect.gen(function*() {
        const owner = yield* account({ subscribe: [{ event: "lead", targetUrl: `https://${PRIVATE_HOST}/hook` }] })
        const callId = `call-${randomUUID()}`
        yield* post(callId, outcome(owner))
        const page = yield* eventually(
          Effect.map(admin("GET", `/v1/accounts/${owner.accountId}/deliveries`), (a) => ((a.json as Json)["deliveries"] ?? []) as Array<Json>),
          (list) => list.some((d) => d["call_id"] === callId && d["status"] === "failed")
        )
        const listed = page.find((d) => d["call_id"] === callId)!
        expect(listed).toMatchObject({ status: "failed", target: `https://${PRIVATE_HOST}/hook`, attempts: 1 })
        const detail = (yield* admin("GET", `/v1/deliveries/${listed["id"]}`)).json as Json
        const [attempt] = detail["attempt_log"] as Array<Json>
        expect(attempt).toMatchObject({ attempt: 1, status_code: null, result: "failed" })
        expect(`${attempt!["error_class"]}: ${attempt!["error"]}`).toMatch(/private|refused|not public/i)
      }))

    it.effect("credentials at rest: after `master-key rotate` every stored connection still pushes (secrets re-sealed under the new key)", () =>
      Effect.gen(function*() {
        const first = yield* account({ subscribe: [{ event: "lead" }] })
        const second = yield* account({ connect: "other", subscribe: [{ event: "lead" }] })
        const rotated = yield* admin("POST", "/v1/master-key/rotate")
        expect(rotated.status).toBe(200)
        expect((rotated.json as Json)["resealed"]).toBeGreaterThanOrEqual(2)
        expect((rotated.json as Json)["undecryptable"]).toEqual([])
        for (const owner of [first, second]) {
          const callId = `call-${randomUUID()}`
          yield* post(callId, outcome(owner))
          expect(yield* settled(callId)).toMatchObject({ status: "succeeded" })
          const [delivery] = yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
          expect(delivery!.event).toMatchObject({ event: "lead", call_id: callId })
        }
      }))

    it.effect("the same call id is queued once: same body → 202 duplicate; a different body → 409; bad input → 400 naming the field", () =>
      Effect.gen(function*() {
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        const body = outcome(owner)
        const first = yield* post(callId, body)
        const again = yield* post(callId, { ...body, tags: [...(body["tags"] as Array<string>)] })
        expect(again.status).toBe(202)
        expect(again.json).toMatchObject({ call_id: callId, duplicate: true, route: "push", push_job_id: (first.json as Json)["push_job_id"] })
        const different = yield* post(callId, outcome(owner, { classification: "booking", booking: booking("requested") }))
        expect(different.status).toBe(409)
        expect(different.json).toEqual({ error: `Call ${callId} already has a different outcome; an outcome is accepted once per call.` })

        const noOffset = yield* post(`call-${randomUUID()}`, outcome(owner, { classification: "booking", booking: booking("requested", { start: "2031-03-03T10:00:00" }) }))
        expect(noOffset.status).toBe(400)
        expect((noOffset.json as Json)["error"]).toMatch(/^booking\.start/)
        const backwards = yield* post(`call-${randomUUID()}`, outcome(owner, { classification: "booking", booking: booking("requested", { end: "2031-03-03T09:00:00-05:00" }) }))
        expect(backwards.json).toEqual({ error: "booking.end is invalid: end must be after start." })
        const missing = yield* post(`call-${randomUUID()}`, { ...outcome(owner), caller: undefined })
        expect(missing.json).toEqual({ error: "caller is required." })
        const unknown = yield* post(`call-${randomUUID()}`, outcome({ accountId: randomUUID(), tenantId: "t-1" }))
        expect(unknown.status).toBe(404)
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
      }))
  })
})

describe("call pipeline across replicas", () => {
  layer(pipelineLayer({ role: "api" }), { excludeTestServices: true })((it) => {
    it.scoped("ROLE=api accepts and queues; only a ROLE=worker replica on the same database pushes and delivers", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const owner = yield* account({ subscribe: [{ event: "lead" }] })
        const callId = `call-${randomUUID()}`
        expect((yield* post(callId, outcome(owner))).json).toMatchObject({ route: "push" })
        yield* Effect.sleep(Duration.millis(1500))
        expect(yield* pushOf(callId)).toMatchObject({ status: "pending", attempts: 0 })
        expect((yield* bridgeWrites("bridge", owner.tenantId)).filter((w) => JSON.stringify(w.body).includes(callId))).toEqual([])

        // A worker replica: on PostgreSQL through its own pool, on PGlite sharing the one session.
        const db = yield* TestDatabase.TestDatabase
        const worker = serverLayer("worker", p.ca)
        yield* Layer.build(
          db.kind === "postgres"
            ? worker.pipe(Layer.provide(Database.layerPostgres({ url: Option.getOrThrow(db.url), poolSize: 4 })))
            : worker
        ).pipe(Effect.orDie)
        yield* eventually(verified(owner.secret, owner.hookPath), (d) => d.length === 1)
        expect(yield* settled(callId)).toMatchObject({ status: "succeeded", attempts: 1 })
      }))
  })
})
