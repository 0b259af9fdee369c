/**
 * The control surface: in process (reset, records, pending faults) and the
 * optional Bearer-protected HTTP control endpoint for cross-process tests.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Faults from "../src/Faults.js"
import * as ReferenceBridge from "../src/ReferenceBridge.js"
import { call } from "./support/bridgeClient.js"
import { bodies, TENANTS } from "./support/fixtures.js"
import * as H from "./support/https.js"
import { startBridge, TLS } from "./support/startBridge.js"

const CONTROL_TOKEN = "control-token-0123456789"

describe("control", () => {
  it.scopedLive("faults set at start apply from the first request; reset clears faults, logs, grants and records", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge({
        faults: [Faults.rule(Faults.status(503), { operation: "capabilities", times: "always" })]
      })
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(503)
      expect((yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(503)
      yield* call("rest", bridge, agent, "leads.create", bodies.lead())
      expect(yield* bridge.control.pendingFaults).toHaveLength(1)
      yield* bridge.control.reset
      expect(yield* bridge.control.pendingFaults).toEqual([])
      expect(yield* bridge.control.received).toEqual([])
      expect((yield* bridge.control.records).leads).toEqual([])
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
    }))

  it.scopedLive("invalid options are refused with a typed error naming the problem", () =>
    Effect.gen(function*() {
      const attempt = (options: Partial<ReferenceBridge.ReferenceBridgeOptions>) =>
        Effect.either(ReferenceBridge.make({ tenants: TENANTS, tls: TLS, ...options }))
      const noUpsert = yield* attempt({ operations: ["capabilities", "leads.create"] })
      expect(Either.isLeft(noUpsert) && noUpsert.left.message).toMatch(/Operation rule 1/)
      const availabilityAlone = yield* attempt({ operations: ["contacts.upsert", "leads.create", "availability.list"] })
      expect(Either.isLeft(availabilityAlone)).toBe(true)
      const spacedKey = yield* attempt({ tenants: [{ tenantId: "t", apiKey: "has space" }] })
      expect(Either.isLeft(spacedKey) && spacedKey.left.message).toMatch(/visible ASCII/)
      const samePaths = yield* attempt({ paths: { rest: "/x", mcp: "/x" } })
      expect(Either.isLeft(samePaths) && samePaths.left.reason).toBe("InvalidOptions")
    }))

  it.scopedLive("the bridge serves a custom host name and paths, with the CA it exposes", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge({ urlHost: "localhost", paths: { rest: "/bridge/v1", mcp: "/rpc" } })
      expect(bridge.restBaseUrl).toBe(`https://localhost:${bridge.port}/bridge/v1`)
      expect(bridge.mcpUrl).toBe(`https://localhost:${bridge.port}/rpc`)
      expect(bridge.ca).toContain("BEGIN CERTIFICATE")
      expect((yield* call("rest", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      expect((yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities())).status).toBe(200)
      const untrusted = yield* Effect.either(H.send(H.agent(TLS.cert), "POST", `${bridge.restBaseUrl}/capabilities`))
      expect(Either.isLeft(untrusted)).toBe(true)
    }))
})

describe("HTTP control endpoint", () => {
  it.scopedLive("sets faults, reads received requests, records and grants, resets; Bearer token required", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge({ controlToken: CONTROL_TOKEN })
      const control = (method: string, path: string, body?: unknown, token = CONTROL_TOKEN) =>
        H.send(agent, method, `${bridge.controlUrl}${path}`, {
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
      expect((yield* control("GET", "/received", undefined, "wrong")).status).toBe(401)
      const set = yield* control("POST", "/faults", {
        fault: { _tag: "Status", status: 429, retryAfter: 3 },
        operation: "leads.create",
        transport: "rest",
        times: 2
      })
      expect(set.status).toBe(204)
      expect((yield* control("POST", "/faults", { fault: { _tag: "Nope" } })).status).toBe(400)
      expect((yield* control("GET", "/faults")).json).toEqual([
        { rule: { fault: { _tag: "Status", status: 429, retryAfter: 3 }, operation: "leads.create", transport: "rest", times: 2 }, remaining: 2 }
      ])
      const lead = bodies.lead()
      expect((yield* call("rest", bridge, agent, "leads.create", lead)).status).toBe(429)
      const received = (yield* control("GET", "/received")).json as Array<{ operation: string; status: number; fault: unknown }>
      expect(received.map((r) => [r.operation, r.status, r.fault])).toEqual([
        ["leads.create", 429, { _tag: "Status", status: 429, retryAfter: 3 }]
      ])
      expect((yield* control("DELETE", "/faults")).status).toBe(204)
      expect((yield* call("rest", bridge, agent, "leads.create", lead)).status).toBe(200)
      const records = (yield* control("GET", "/records")).json as { leads: Array<{ idempotencyKey: string }> }
      expect(records.leads.map((l) => l.idempotencyKey)).toEqual([lead.idempotency_key])
      expect((yield* control("GET", "/grants")).json).toEqual([])
      expect((yield* control("POST", "/revoke-tokens")).status).toBe(204)
      expect((yield* control("POST", "/reset")).status).toBe(204)
      expect((yield* control("GET", "/received")).json).toEqual([])
      expect((yield* bridge.control.records).leads).toEqual([])
    }))

  it.scopedLive("without a control token there is no control endpoint", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* startBridge()
      expect(bridge.controlUrl).toBeUndefined()
      const answer = yield* H.send(agent, "GET", `${bridge.origin}/control/received`, { headers: { authorization: "Bearer x" } })
      expect(answer.status).toBe(404)
    }))
})
