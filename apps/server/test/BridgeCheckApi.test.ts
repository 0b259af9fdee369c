import { expect, layer } from "@effect/vitest"
import { Faults, ReferenceBridge } from "@crm-relay/reference-bridge"
import { Effect } from "effect"
import * as S from "./support/ConnectionsServer.js"

interface Report {
  readonly passed: boolean
  readonly earned_level: string
  readonly requested_level: string
  readonly counts: { readonly pass: number; readonly fail: number; readonly skip: number }
  readonly checks: ReadonlyArray<{ readonly id: string; readonly status: string; readonly level: string }>
}

const check = (accountId: string, tenantId: string, body: unknown = {}) =>
  S.admin("POST", `/v1/accounts/${accountId}/connections/${encodeURIComponent(tenantId)}/check`, body)

const connected = (transport: "rest" | "mcp", auth: "api_key" | "oauth") =>
  Effect.gen(function*() {
    const bridge = yield* ReferenceBridge.ReferenceBridge
    yield* bridge.control.reset
    const id = yield* S.account("live")
    const set = yield* S.admin("PUT", `/v1/accounts/${id}/connections/${S.TENANT.tenantId}`, S.form(bridge, transport, auth))
    expect(set.status).toBe(200)
    return { bridge, id }
  })

layer(S.Live)("POST /v1/accounts/{id}/connections/{tenantId}/check", (it) => {
  for (const [transport, auth] of [["rest", "api_key"], ["mcp", "oauth"]] as const) {
    it.effect(`${transport} × ${auth}: the stored connection earns the read-only level, and the write level with {"writes": true}; no secret in the answer`, () =>
      Effect.gen(function*() {
        const { bridge, id } = yield* connected(transport, auth)
        const readOnly = yield* check(id, S.TENANT.tenantId)
        expect(readOnly.status).toBe(200)
        expect(readOnly.json).toMatchObject({ passed: true, earned_level: "read-only", requested_level: "read-only", tenant_id: S.TENANT.tenantId })
        const records = yield* bridge.control.records
        expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])

        const writes = yield* check(id, S.TENANT.tenantId, { writes: true })
        const report = writes.json as Report
        expect(report).toMatchObject({ passed: true, earned_level: "writes", requested_level: "writes" })
        expect(report.counts.fail).toBe(0)
        for (const text of [readOnly.text, writes.text]) {
          expect(text).not.toContain(S.TENANT.apiKey)
          expect(text).not.toContain(S.TENANT.clientSecret)
        }
      }))
  }

  it.effect("Operation rule 4: a bridge answering 51 slots fails availability.at_most_50 and earns no level; the answer is still 200 with the report", () =>
    Effect.gen(function*() {
      const { bridge, id } = yield* connected("rest", "api_key")
      yield* bridge.control.setFault(Faults.invalidReceipt("too_many_slots"), { operation: "availability.list", times: "always" })
      const answer = yield* check(id, S.TENANT.tenantId)
      expect(answer.status).toBe(200)
      const report = answer.json as Report
      expect(report).toMatchObject({ passed: false, earned_level: "none" })
      expect(report.checks.filter((c) => c.status === "fail").map((c) => c.id)).toEqual(["availability.at_most_50"])
      yield* bridge.control.clearFaults
    }))

  it.effect("no account, or no connection for the tenant: 404 with the Error object; a body that is not the check request: 400", () =>
    Effect.gen(function*() {
      const missingAccount = yield* check("00000000-0000-4000-8000-000000000000", S.TENANT.tenantId)
      expect(missingAccount.status).toBe(404)
      const id = yield* S.account("live")
      const missingConnection = yield* check(id, "t-unknown")
      expect([missingConnection.status, missingConnection.json]).toEqual([404, { error: "Tenant t-unknown has no bridge connection; set one first." }])
      const bad = yield* check(id, S.TENANT.tenantId, { writes: "yes" })
      expect(bad.status).toBe(400)
    }))
})
