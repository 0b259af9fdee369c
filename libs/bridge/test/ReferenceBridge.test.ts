/**
 * The client against the contract-faithful reference bridge
 * (apps/reference-bridge) over real TLS on loopback: both transports × both
 * credential kinds, the real write path (idempotency, atomic booking, 409),
 * and every fault the bridge can inject.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"
import { Operations } from "@crm-relay/contract"
import { Faults } from "@crm-relay/reference-bridge"
import { Eventually } from "@crm-relay/testing"
import type { BridgeClient } from "../src/BridgeClient.js"
import * as Drive from "./support/Drive.js"
import * as Harness from "./support/Harness.js"
import * as Reference from "./support/Reference.js"
import * as Samples from "./support/Samples.js"

type Client = BridgeClient["Type"]

const retryAfterMillis = (error: { readonly _tag: string }): number | null =>
  error._tag === "Transient" && "retryAfter" in error && Option.isOption(error.retryAfter)
    ? Option.getOrNull(Option.map(error.retryAfter as Option.Option<Duration.Duration>, Duration.toMillis))
    : null

/** Upserts the sample contact and returns an appointment for it. */
const appointmentFor = (client: Client) =>
  Effect.map(client.contactsUpsert(Samples.contact), ({ id }) => ({ ...Samples.appointment, contact_external_id: id }))

/** What to call so that an invalid-receipt fault of `kind` hits: the first operation it applies to, in this order. */
const PREFERENCE: ReadonlyArray<Operations.OperationName> = [
  "contacts.upsert",
  "leads.create",
  "appointments.create",
  "availability.list",
  "capabilities",
  "contacts.search"
]
const callFor = (operation: Operations.OperationName, client: Client): Effect.Effect<unknown, unknown> => {
  switch (operation) {
    case "capabilities":
      return client.capabilities()
    case "contacts.search":
      return Effect.zipRight(
        client.contactsUpsert(Samples.contact),
        client.contactsSearch({ phone: Samples.contact.phones[0]!, email: "" })
      )
    case "contacts.upsert":
      return client.contactsUpsert(Samples.contact)
    case "availability.list":
      return client.availabilityList(Samples.window)
    case "appointments.create":
      return Effect.flatMap(appointmentFor(client), (appointment) => client.appointmentsCreate(appointment))
    case "leads.create":
      return client.leadsCreate(Samples.lead)
  }
}

// An invented match that carries a nonblank id is indistinguishable from a real one; the client
// only guarantees that nothing but the id is believed (tested below).
const RECEIPT_KINDS = Faults.ReceiptKind.literals.filter((kind) =>
  kind !== "invented_match" && !Faults.RECEIPT_KIND_OPERATIONS[kind].includes(Faults.TOKEN_OPERATION)
)

layer(Reference.layer)("against the reference bridge", (it) => {
  for (const spec of Harness.MATRIX) {
    describe(`${spec.transport} transport × ${spec.auth}`, () => {
      it.effect("What the service does: connecting runs the capabilities check only — the bridge saw one capabilities request and stored nothing", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          const capabilities = yield* client.connect()
          expect(capabilities).toEqual({
            contract_version: "svc.crm.v1",
            operations: [...Operations.OPERATIONS],
            booking_closes_availability: true
          })
          const received = yield* Reference.bridgeRequests(bridge)
          expect(received.map((r) => [r.operation, r.tenantId, r.idempotencyKey])).toEqual([["capabilities", "t-1", undefined]])
          const records = yield* bridge.control.records
          expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])
        }))

      it.effect("Idempotency rule 1: the post-call write path — upsert, match, availability, atomic booking with 409, lead; replays return the original records", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          const created = yield* client.contactsUpsert(Samples.contact)
          expect(created.is_new).toBe(true)
          const replayed = yield* client.contactsUpsert({ ...Samples.contact, full_name: "Ada King" })
          expect(replayed.id).toBe(created.id)
          const found = yield* client.contactsSearch({ phone: "", email: "ada@example.com" })
          expect(found).toEqual({ contact: { id: created.id } })
          const { slots } = yield* client.availabilityList(Samples.window)
          expect(slots.length).toBeGreaterThan(0)
          const first = slots[0]!
          const booking = { ...Samples.appointment, contact_external_id: created.id, start: first.start, end: first.end }
          const receipt = yield* client.appointmentsCreate(booking)
          expect(receipt.confirmed).toBe(true)
          // Same booking again: the same key, so the original receipt.
          expect((yield* client.appointmentsCreate({ ...booking, notes: "changed" })).id).toBe(receipt.id)
          // Another job for the same slot: a different key, and the slot is taken.
          const taken = yield* Effect.flip(client.appointmentsCreate({ ...booking, job_type: "Other job" }, { policy: "post-call" }))
          expect(taken).toMatchObject({ _tag: "Conflict", status: 409, operation: "appointments.create" })
          const lead = yield* client.leadsCreate(Samples.lead)
          expect((yield* client.leadsCreate({ ...Samples.lead, summary: "changed" })).id).toBe(lead.id)
          const records = yield* bridge.control.records
          expect([records.contacts.length, records.appointments.length, records.leads.length]).toEqual([1, 1, 1])
          // The later slots of the day are still open; the booked one is not.
          const after = yield* client.availabilityList(Samples.window)
          expect(after.slots.some((s) => s.start === first.start)).toBe(false)
        }))

      for (const kind of RECEIPT_KINDS) {
        const operation = PREFERENCE.find((op) => Faults.RECEIPT_KIND_OPERATIONS[kind].includes(op))!
        it.effect(`Errors: an invalid receipt (${kind} on ${operation}) is rejected and is not a confirmed write`, () =>
          Effect.gen(function*() {
            const { bridge, client } = yield* Reference.client(spec)
            yield* bridge.control.setFault(Faults.invalidReceipt(kind), { operation })
            const error = yield* Effect.flip(callFor(operation, client))
            expect(error).toMatchObject({ _tag: "Permanent", kind: "invalid_receipt", operation })
            const pending = yield* bridge.control.pendingFaults
            expect(pending).toHaveLength(0)
          }))
      }

      it.effect("Operation rule 2: a match is never trusted beyond its id", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.invalidReceipt("invented_match"), { operation: "contacts.search" })
          const found = yield* client.contactsSearch({ phone: "+15550000000", email: "" })
          expect(found).toEqual({ contact: { id: "ct_invented_by_fault" } })
        }))

      it.effect("Errors: 409 — no booking is confirmed and there is no automatic retry", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          const appointment = yield* appointmentFor(client)
          yield* bridge.control.setFault(Faults.status(409), { operation: "appointments.create", times: "always" })
          const error = yield* Effect.flip(client.appointmentsCreate(appointment, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Conflict", status: 409 })
          const received = yield* Reference.bridgeRequests(bridge)
          expect(received.filter((r) => r.operation === "appointments.create")).toHaveLength(1)
        }))

      it.effect("Errors: 429 is transient and Retry-After is carried (2 s)", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.status(429, { retryAfter: 2 }), { operation: "leads.create" })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Transient", status: 429 })
          expect(retryAfterMillis(error)).toBe(2000)
        }))

      it.effect("Limits: Retry-After honored up to 5 minutes — 503 with Retry-After 3600 carries 5 minutes", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.status(503, { retryAfter: 3600 }), { operation: "leads.create" })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(retryAfterMillis(error)).toBe(300_000)
        }))

      it.effect("Errors: 429 or 5xx — post-call delivery retries with the same idempotency key and stores one lead", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.status(503), { operation: "leads.create", times: 2 })
          const exit = yield* Drive.run(client.leadsCreate(Samples.lead, { policy: "post-call" }))
          expect(Exit.isSuccess(exit)).toBe(true)
          const attempts = (yield* Reference.bridgeRequests(bridge)).filter((r) => r.operation === "leads.create")
          expect(attempts.map((r) => r.status)).toEqual([503, 503, 200])
          expect(new Set(attempts.map((r) => r.idempotencyKey)).size).toBe(1)
          expect((yield* bridge.control.records).leads).toHaveLength(1)
        }))

      it.effect("Errors rule 2: after a lost response following a committed write, the replay returns the original receipt", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.lostResponse(), { operation: "leads.create" })
          const exit = yield* Drive.run(client.leadsCreate(Samples.lead, { policy: "post-call" }))
          const records = yield* bridge.control.records
          expect(records.leads).toHaveLength(1)
          expect(exit).toEqual(Exit.succeed({ id: records.leads[0]!.id }))
          const attempts = (yield* Reference.bridgeRequests(bridge)).filter((r) => r.operation === "leads.create")
          expect(attempts.map((r) => r.status)).toEqual(["lost", 200])
        }))

      it.effect("Errors: a 5xx after commit is transient; the retry gets the original booking, not a second one", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          const appointment = yield* appointmentFor(client)
          yield* bridge.control.setFault(Faults.status(502, { afterCommit: true }), { operation: "appointments.create" })
          const exit = yield* Drive.run(client.appointmentsCreate(appointment, { policy: "post-call" }))
          const records = yield* bridge.control.records
          expect(records.appointments).toHaveLength(1)
          expect(exit).toEqual(Exit.succeed(expect.objectContaining({ id: records.appointments[0]!.id, confirmed: true })))
        }))

      it.effect("Errors: redirects are permanent and are not followed", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.redirect(`${bridge.restBaseUrl}/leads`, 307), { operation: "leads.create" })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead))
          expect(error).toMatchObject({ _tag: "Permanent", kind: "redirect", status: 307 })
          expect((yield* Reference.bridgeRequests(bridge)).filter((r) => r.operation === "leads.create")).toHaveLength(1)
        }))

      it.effect("Transport rules: a gzip answer is refused — Permanent", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.gzip(), { operation: "contacts.upsert" })
          expect(yield* Effect.flip(client.contactsUpsert(Samples.contact))).toMatchObject({ _tag: "Permanent", kind: "encoding" })
        }))

      it.effect("Errors: malformed JSON is rejected — Permanent", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.malformedJson(), { operation: "contacts.upsert" })
          expect(yield* Effect.flip(client.contactsUpsert(Samples.contact))).toMatchObject({ _tag: "Permanent", kind: "malformed_json" })
        }))

      it.effect("Errors: an empty body is not success", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.emptyBody(), { operation: "leads.create" })
          expect(yield* Effect.flip(client.leadsCreate(Samples.lead))).toMatchObject({ _tag: "Permanent", kind: "malformed_json" })
        }))

      it.effect("Limits: response body size 1 MiB — an oversized receipt is refused", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* bridge.control.setFault(Faults.oversize(), { operation: "leads.create" })
          expect(yield* Effect.flip(client.leadsCreate(Samples.lead))).toMatchObject({ _tag: "Permanent", kind: "egress_refused" })
        }))

      it.effect("Authentication rule 4: a credential of another tenant is rejected — Auth", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ ...spec, tenantId: "t-2" })
          const error = yield* Effect.flip(client.capabilities())
          expect(error).toMatchObject({ _tag: "Auth", status: 401 })
          const received = yield* Reference.bridgeRequests(bridge)
          // API key: never replayed; OAuth: one fresh grant and one replay.
          expect(received).toHaveLength(spec.auth === "api_key" ? 1 : 2)
        }))

      it.effect("Errors rule 3: an in-call operation is time-bounded — a bridge slower than the budget is a Transient timeout", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client(spec)
          yield* client.capabilities() // the OAuth grant happens outside the measured call
          yield* bridge.control.setFault(Faults.delay(60_000), { operation: "contacts.search" })
          const fiber = yield* Effect.fork(client.contactsSearch({ phone: "+15550100042", email: "" }, { policy: "in-call" }))
          // Wait (in real time) until the bridge holds the request, then let the budget run out.
          yield* Eventually.eventually(Effect.map(bridge.control.pendingFaults, (pending) => pending.length === 0))
          yield* TestClock.adjust(Duration.sum(Duration.seconds(8), Duration.millis(1)))
          const error = yield* Effect.flip(Fiber.join(fiber))
          expect(error).toMatchObject({ _tag: "Transient", status: null, operation: "contacts.search" })
        }))
    })
  }

  for (const transport of Harness.TRANSPORTS) {
    describe(`API key over ${transport}`, () => {
      it.effect("Authentication rule 3: an API-key 401 is never replayed — the bridge saw exactly one request", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport, auth: "api_key" })
          yield* bridge.control.setFault(Faults.status(401), { operation: "contacts.upsert", times: "always" })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Auth", status: 401 })
          expect(yield* Reference.bridgeRequests(bridge)).toHaveLength(1)
        }))
    })

    describe(`OAuth over ${transport}`, () => {
      it.effect("Authentication rule 3: a bridge 401 causes one fresh grant and one replay of the same request", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport, auth: "oauth" })
          yield* client.capabilities()
          yield* bridge.control.revokeTokens
          const receipt = yield* client.leadsCreate(Samples.lead)
          const attempts = (yield* Reference.bridgeRequests(bridge)).filter((r) => r.operation === "leads.create")
          expect(attempts.map((r) => r.status)).toEqual([401, 200])
          expect(attempts[0]!.idempotencyKey).toBe(attempts[1]!.idempotencyKey)
          expect(attempts[0]!.body).toEqual(
            transport === "rest" ? attempts[1]!.body : expect.objectContaining({ params: expect.anything() })
          )
          expect((yield* bridge.control.grants).length).toBe(2)
          expect((yield* bridge.control.records).leads.map((l) => l.id)).toEqual([receipt.id])
        }))

      it.effect("Authentication rule 3: a second 401 stops — Auth after exactly two requests and two grants", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport, auth: "oauth" })
          yield* bridge.control.setFault(Faults.status(401), { operation: "leads.create", times: "always" })
          const error = yield* Effect.flip(client.leadsCreate(Samples.lead, { policy: "post-call" }))
          expect(error).toMatchObject({ _tag: "Auth", status: 401 })
          expect(yield* Reference.bridgeRequests(bridge)).toHaveLength(2)
          expect(yield* bridge.control.grants).toHaveLength(2)
        }))

      it.effect("Authentication rule 3: expires_in 3600 is cached for 270 s, then a fresh grant is requested", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport, auth: "oauth" })
          yield* client.capabilities()
          yield* TestClock.adjust("269 seconds")
          yield* client.capabilities()
          expect(yield* bridge.control.grants).toHaveLength(1)
          yield* TestClock.adjust("1 second")
          yield* client.capabilities()
          expect(yield* bridge.control.grants).toHaveLength(2)
        }))

      it.effect("Authentication rule 3: expires_in 30 is not cached — every call gets a fresh grant", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({
            transport,
            auth: "oauth",
            tenantId: Reference.TENANTS.short.tenantId,
            oauthClient: Reference.TENANTS.short
          })
          yield* client.capabilities()
          yield* client.capabilities()
          expect(yield* bridge.control.grants).toHaveLength(2)
        }))

      it.effect("Authentication rule 3: without expires_in a fresh grant is requested next time", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({
            transport,
            auth: "oauth",
            tenantId: Reference.TENANTS.omit.tenantId,
            oauthClient: Reference.TENANTS.omit
          })
          yield* client.capabilities()
          yield* client.capabilities()
          expect(yield* bridge.control.grants).toHaveLength(2)
        }))

      it.effect("Authentication rule 3: the token endpoint receives Basic auth of the form-encoded id and secret and grant_type=client_credentials", () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport, auth: "oauth" })
          yield* client.capabilities()
          const grant = (yield* bridge.control.received).find((r) => r.transport === "oauth")!
          expect(grant.status).toBe(200)
          expect(grant.authorizationScheme).toBe("Basic")
          expect(grant.headers["content-type"]).toBe("application/x-www-form-urlencoded")
          expect(grant.headers["accept"]).toBe("application/json")
          expect(grant.body).toEqual({ grant_type: "client_credentials" })
        }))

      const tokenFaults: ReadonlyArray<readonly [string, Faults.Fault, Record<string, unknown>]> = [
        ["Errors: a token endpoint 503 is Transient", Faults.status(503), { _tag: "Transient", status: 503 }],
        ["Authentication rule 3: token_type must be Bearer", Faults.invalidReceipt("token_type_not_bearer"), { _tag: "Permanent", kind: "invalid_receipt" }],
        ["Authentication rule 3: a token answer without access_token is refused", Faults.invalidReceipt("missing_access_token"), { _tag: "Permanent", kind: "invalid_receipt" }]
      ]
      for (const [name, fault, expected] of tokenFaults) {
        it.effect(`${name} — nothing reaches the bridge`, () =>
          Effect.gen(function*() {
            const { bridge, client } = yield* Reference.client({ transport, auth: "oauth" })
            yield* bridge.control.setFault(fault, { operation: Faults.TOKEN_OPERATION })
            expect(yield* Effect.flip(client.leadsCreate(Samples.lead))).toMatchObject(expected)
            expect(yield* Reference.bridgeRequests(bridge)).toHaveLength(0)
          }))
      }
    })
  }

  describe("MCP answers", () => {
    it.effect("Response framing: request-scoped SSE with notifications first is a success", () =>
      Effect.gen(function*() {
        const { bridge, client } = yield* Reference.client({ transport: "mcp", auth: "api_key" })
        yield* bridge.control.setFault(Faults.mcpSse(3), { operation: "contacts.upsert" })
        expect((yield* client.contactsUpsert(Samples.contact)).is_new).toBe(true)
      }))

    it.effect("MCP transport: the bridge received the contract headers with values matching the body", () =>
      Effect.gen(function*() {
        const { bridge, client } = yield* Reference.client({ transport: "mcp", auth: "api_key" })
        yield* client.leadsCreate(Samples.lead)
        const [request] = yield* Reference.bridgeRequests(bridge)
        expect(request!.status).toBe(200)
        expect(request!.headers).toMatchObject({
          "content-type": "application/json",
          "accept": "application/json, text/event-stream",
          "mcp-protocol-version": "2026-07-28",
          "mcp-method": "tools/call",
          "mcp-name": "svc_leads_create"
        })
        expect(request!.authorizationScheme).toBe("Bearer")
        expect(request!.idempotencyKey).toMatch(/^[0-9a-f]{64}$/)
      }))

    const refusals: ReadonlyArray<readonly [string, Faults.Fault, Record<string, unknown>]> = [
      ["Unsupported: server requests fail the operation", Faults.mcpServerRequest(), { _tag: "Permanent", kind: "protocol" }],
      ["Unsupported: JSON-RPC errors fail the operation", Faults.mcpJsonRpcError(-32000, "Please call me back"), { _tag: "Permanent", kind: "protocol" }],
      ["Unsupported: incomplete results fail the operation", Faults.mcpResultType("input_required"), { _tag: "Permanent", kind: "protocol" }],
      ["Response body shape: isError true fails the operation (bare: refused, permanent)", Faults.mcpIsError(), { _tag: "Permanent", kind: "tool_error" }],
      ["Refusing over MCP: isError naming status 409 is the 409 (Conflict)", Faults.mcpIsError(409), { _tag: "Conflict", status: 409 }],
      ["Refusing over MCP: isError naming status 503 is the 503 (Transient)", Faults.mcpIsError(503), { _tag: "Transient", status: 503 }],
      ["Response body shape: plain text is not parsed into a receipt", Faults.mcpTextOnly(), { _tag: "Permanent", kind: "protocol" }],
      ["Response body shape: an id that does not echo the request ID fails the operation", Faults.mcpWrongId(), { _tag: "Permanent", kind: "protocol" }]
    ]
    for (const [name, fault, expected] of refusals) {
      it.effect(`${name} — ${String(expected["_tag"])}, never a receipt`, () =>
        Effect.gen(function*() {
          const { bridge, client } = yield* Reference.client({ transport: "mcp", auth: "api_key" })
          yield* bridge.control.setFault(fault, { operation: "contacts.upsert", times: "always" })
          const error = yield* Effect.flip(client.contactsUpsert(Samples.contact))
          expect(error).toMatchObject({ ...expected, operation: "contacts.upsert" })
          expect(error.message).not.toContain("call me back")
          expect(error.message).not.toContain("Injected")
        }))
    }
  })
})
