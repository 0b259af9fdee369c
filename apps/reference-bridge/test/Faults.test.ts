/**
 * The switchable faults: each is consumed per matching request and makes
 * the bridge misbehave exactly as named, so client tests can rely on them.
 */
import { Operations, Values } from "@crm-relay/contract"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { gunzipSync } from "node:zlib"
import * as Faults from "../src/Faults.js"
import type { TransportName } from "./support/bridgeClient.js"
import { call } from "./support/bridgeClient.js"
import { appointment, bodies, isValidReceipt, MONDAY_10, window } from "./support/fixtures.js"
import { startBridge } from "./support/startBridge.js"

describe("wire faults (REST)", () => {
  it.scopedLive("a status fault answers the next N matching requests, with Retry-After, then stops", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(Faults.status(429, { retryAfter: 2 }), { operation: "leads.create", times: 2 })
      const lead = bodies.lead()
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      expect((yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      const first = yield* call("rest", bridge, agent, "leads.create", lead)
      expect([first.status, first.answer.headers["retry-after"]]).toEqual([429, "2"])
      expect((yield* call("mcp", bridge, agent, "leads.create", lead)).status).toBe(429)
      expect((yield* call("rest", bridge, agent, "leads.create", lead)).status).toBe(200)
      expect(yield* bridge.control.pendingFaults).toEqual([])
      expect((yield* bridge.control.received).map((r) => r.fault?._tag)).toEqual([undefined, undefined, "Status", "Status", undefined])
    }))

  it.scopedLive("a status fault after commit stores the write; the replay with the same key returns it", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(Faults.status(503, { afterCommit: true }), { operation: "contacts.upsert" })
      const body = bodies.upsert()
      expect((yield* call("rest", bridge, agent, "contacts.upsert", body)).status).toBe(503)
      const replay = yield* call("rest", bridge, agent, "contacts.upsert", body)
      expect(replay.receipt).toEqual({ id: (yield* bridge.control.records).contacts[0]!.id, is_new: true })
    }))

  it.scopedLive("401, 409, 400 and 500 can be injected on any operation", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      for (const status of [401, 409, 400, 500]) {
        yield* bridge.control.setFault(Faults.status(status))
        const answer = yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())
        expect(answer.status).toBe(status)
        if (status === 401) expect(answer.answer.headers["www-authenticate"]).toMatch(/^Bearer /)
      }
    }))

  it.scopedLive("a redirect answers 302 with a Location and runs nothing", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(Faults.redirect("https://127.0.0.1:1/elsewhere"))
      const answer = yield* call("rest", bridge, agent, "leads.create", bodies.lead())
      expect([answer.status, answer.answer.headers["location"]]).toEqual([302, "https://127.0.0.1:1/elsewhere"])
      expect((yield* bridge.control.records).leads).toHaveLength(0)
    }))

  it.scopedLive("a delay holds the answer", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFault(Faults.delay(300))
      const started = Date.now()
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      expect(Date.now() - started).toBeGreaterThanOrEqual(290)
    }))

  it.scopedLive("gzip, malformed JSON, an oversize body and an empty body wrap the real answer", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const caps = () => call("rest", bridge, agent, "capabilities", bodies.capabilities())
      yield* bridge.control.setFault(Faults.gzip())
      const gz = yield* caps()
      expect(gz.answer.headers["content-encoding"]).toBe("gzip")
      expect(isValidReceipt("capabilities", JSON.parse(gunzipSync(gz.answer.raw).toString()))).toBe(true)
      yield* bridge.control.setFault(Faults.malformedJson())
      const malformed = yield* caps()
      expect([malformed.status, malformed.answer.json]).toEqual([200, undefined])
      expect(malformed.answer.text.startsWith("{\"contract_version\"")).toBe(true)
      yield* bridge.control.setFault(Faults.oversize())
      const big = yield* caps()
      expect(big.answer.raw.length).toBeGreaterThan(1024 * 1024)
      expect(isValidReceipt("capabilities", big.answer.json)).toBe(true)
      yield* bridge.control.setFault(Faults.emptyBody())
      const empty = yield* caps()
      expect([empty.status, empty.answer.raw.length]).toEqual([200, 0])
    }))

  it.scopedLive("MCP wire faults keep the SSE framing parseable up to the fault", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      yield* bridge.control.setFaults([Faults.rule(Faults.mcpSse(1)), Faults.rule(Faults.oversize())])
      const sse = yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities())
      expect(sse.answer.headers["content-type"]).toMatch(/^text\/event-stream/)
      const big = yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities())
      expect(big.answer.raw.length).toBeGreaterThan(1024 * 1024)
      expect(big.receipt).toEqual(sse.receipt)
    }))

  it.scopedLive("a request body over 1 MiB is refused with 413", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      const huge = { ...bodies.capabilities(), padding: "x".repeat(1024 * 1024) }
      expect((yield* call("rest", bridge, agent, "capabilities", huge)).status).toBe(413)
    }))
})

/** A request for `operation` whose real answer is a success, after any setup it needs. */
const scenario = (transport: TransportName, operation: Operations.OperationName) =>
  Effect.gen(function*() {
    const { agent, bridge } = yield* startBridge()
    const send = (op: Operations.OperationName, body: Record<string, unknown>) => call(transport, bridge, agent, op, body)
    let body: Record<string, unknown>
    switch (operation) {
      case "capabilities":
        body = bodies.capabilities()
        break
      case "contacts.search":
        body = bodies.search("+1 555 999 0000", "")
        break
      case "contacts.upsert":
        body = bodies.upsert()
        break
      case "availability.list":
        body = bodies.availability(window("2026-03-02T00:00:00-05:00", "2026-03-03T00:00:00-05:00"))
        break
      case "appointments.create": {
        const { id } = (yield* send("contacts.upsert", bodies.upsert())).receipt as { id: string }
        body = bodies.appointment(appointment(id, MONDAY_10))
        break
      }
      case "leads.create":
        body = bodies.lead()
        break
    }
    return { bridge, body, send: () => send(operation, body) }
  })

/** Whether a receipt breaks the contract for `body`, including the checks a Schema cannot make alone. */
const brokenReceipt = (operation: Operations.OperationName, body: Record<string, unknown>, receipt: unknown): boolean => {
  if (!isValidReceipt(operation, receipt)) return true
  if (operation === "appointments.create") {
    const requested = body["appointment"] as { start: Values.Instant; end: Values.Instant }
    const answered = receipt as { start: Values.Instant; end: Values.Instant }
    return !Values.sameInstant(requested.start, answered.start) || !Values.sameInstant(requested.end, answered.end)
  }
  if (operation === "availability.list") {
    const w = body["window"] as { start: Values.Instant; end: Values.Instant }
    return (receipt as { slots: Array<{ start: Values.Instant; end: Values.Instant }> }).slots.some((s) =>
      Values.instantNanos(s.start) < Values.instantNanos(w.start) || Values.instantNanos(s.end) > Values.instantNanos(w.end)
    )
  }
  if (operation === "contacts.search") return (receipt as { contact: unknown }).contact !== null // nothing exists to match
  return false
}

const BRIDGE_KINDS = Faults.ReceiptKind.literals.filter((kind) => !Faults.RECEIPT_KIND_OPERATIONS[kind].includes("oauth.token"))

describe.each<TransportName>(["rest", "mcp"])("invalid receipts over %s", (transport) => {
  it.scopedLive.each(BRIDGE_KINDS)("InvalidReceipt %s answers a 2xx receipt the contract refuses", (kind) =>
    Effect.gen(function*() {
      for (const operation of Faults.RECEIPT_KIND_OPERATIONS[kind]) {
        if (operation === "oauth.token") continue
        const { body, bridge, send } = yield* scenario(transport, operation)
        const honest = yield* send()
        expect(brokenReceipt(operation, body, honest.receipt)).toBe(false)
        yield* bridge.control.setFault(Faults.invalidReceipt(kind), { transport })
        const corrupted = yield* Effect.either(send())
        expect(Either.isRight(corrupted) && corrupted.right.status).toBe(200)
        if (Either.isRight(corrupted)) expect(brokenReceipt(operation, body, corrupted.right.receipt)).toBe(true)
      }
    }))
})
