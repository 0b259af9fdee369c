/**
 * Traces exported over OTLP/HTTP to a local receiver: one call is one trace,
 * from the outcome request through its push job and bridge exchanges to each
 * delivery attempt (the job stores the request's traceparent).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import * as OtlpReceiver from "./support/OtlpReceiver.js"
import { admin, eventually, layer as pipelineLayer, Pipeline, TENANTS } from "./support/Pipeline.js"
import { ADMIN_TOKEN, request } from "./support/TestServer.js"

class Receiver extends Context.Tag("test/OtlpReceiver")<Receiver, OtlpReceiver.OtlpReceiver>() {}

const TracedPipeline = Layer.unwrapScoped(
  Effect.map(OtlpReceiver.make, (receiver) =>
    Layer.merge(
      pipelineLayer({ tracing: { endpoint: receiver.endpoint, serviceName: "crm-relay-test", exportDelayMillis: 100 } }),
      Layer.succeed(Receiver, receiver)
    ))
)

type Json = Record<string, any>

describe("traces", () => {
  layer(TracedPipeline, { excludeTestServices: true, timeout: Duration.seconds(90) })((it) => {
    it.effect("\"one call is one trace\": the outcome request, its push job, each bridge exchange and each delivery attempt share its trace id, as one tree; the exchanges and jobs are counted", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const receiver = yield* Receiver
        const accountId = ((yield* admin("POST", "/v1/accounts", { name: "Traced" })).json as Json)["id"] as string
        const key = ((yield* admin("POST", `/v1/accounts/${accountId}/keys`)).json as Json)["key"] as string
        const set = yield* admin("PUT", `/v1/accounts/${accountId}/connections/${TENANTS.main.tenantId}`, {
          transport: "rest",
          url: p.bridge.restBaseUrl,
          auth: { type: "api_key", key: TENANTS.main.apiKey }
        })
        expect(set.status).toBe(200)
        const hookPath = `/hook/${randomUUID()}`
        const subscribed = yield* request("POST", `${p.public}/subscribe`, {
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ targetUrl: p.receiver.url(hookPath), event: "lead" })
        })
        expect(subscribed.status).toBe(201)

        const callId = `call-${randomUUID()}`
        const accepted = yield* admin("POST", `/v1/calls/${callId}/outcome`, {
          account_id: accountId,
          tenant_id: TENANTS.main.tenantId,
          classification: "lead",
          source: "Traced Receptionist (phone)",
          tags: [],
          caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+1 555 010 0000"], emails: [], address: "" },
          lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "high" }
        })
        expect(accepted.status).toBe(202)
        yield* eventually(Effect.sync(() => p.receiver.received().filter((d) => d.path === hookPath)), (d) => d.length === 1)

        // The outcome request's server span is the root of the call's trace.
        const isOutcome = (s: OtlpReceiver.ReceivedSpan) => s.attributes["http.route"] === "/v1/calls/:callId/outcome"
        const spans = yield* eventually(Effect.sync(() => receiver.spans()), (all) => {
          const root = all.find(isOutcome)
          return root !== undefined && all.some((s) => s.traceId === root.traceId && s.name === "JobQueue.run deliveries")
        })
        const root = spans.find(isOutcome)!
        expect(root.parentSpanId).toBe("")
        expect(root.serviceName).toBe("crm-relay-test")
        const trace = spans.filter((s) => s.traceId === root.traceId)
        const byId = new Map(trace.map((s) => [s.spanId, s]))
        // Every span of the trace hangs, through its parents, from the request's span: one tree.
        const ancestors = (span: OtlpReceiver.ReceivedSpan): Array<string> => {
          const names: Array<string> = []
          let parent = byId.get(span.parentSpanId)
          while (parent !== undefined) {
            names.push(parent.name)
            parent = byId.get(parent.parentSpanId)
          }
          return names
        }
        for (const span of trace) {
          if (span !== root) expect([span.name, byId.has(span.parentSpanId)]).toEqual([span.name, true])
        }
        const named = (name: string) => trace.filter((s) => s.name === name)
        const [push] = named("JobQueue.run crm_push_jobs")
        expect(push).toBeDefined()
        expect(ancestors(push!)).toContain("CrmPushJobs.enqueue")
        expect(ancestors(push!).at(-1)).toBe(root.name)
        for (const operation of ["BridgeClient.contacts.upsert", "BridgeClient.leads.create"]) {
          const [exchange] = named(operation)
          expect(exchange).toBeDefined()
          expect(ancestors(exchange!)).toContain("JobQueue.run crm_push_jobs")
        }
        const [delivery] = named("JobQueue.run deliveries")
        expect(delivery!.attributes["job.queue"]).toBe("deliveries")
        expect(ancestors(delivery!)).toContain("Fanout.enqueue")
        expect(ancestors(delivery!)).toContain("JobQueue.run crm_push_jobs")
        expect(receiver.rejected()).toBe(0)

        // The same call, counted: each exchange by operation, transport and outcome; the push job and the delivery by result.
        const scraped = yield* request("GET", `${p.admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
        const families = new Map(parsePrometheusTextFormat(scraped.text).map((f) => [f.name, f]))
        const value = (family: string, labels: Record<string, string>) =>
          Number(families.get(family)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value ?? 0)
        for (const operation of ["contacts.upsert", "leads.create"]) {
          expect(value("crm_relay_bridge_exchanges_total", { operation, transport: "rest", outcome: "ok" })).toBeGreaterThanOrEqual(1)
        }
        expect(families.get("crm_relay_bridge_exchange_duration_seconds")?.type).toBe("HISTOGRAM")
        expect(value("crm_relay_jobs_total", { queue: "crm_push_jobs", result: "completed" })).toBeGreaterThanOrEqual(1)
        expect(value("crm_relay_jobs_total", { queue: "deliveries", result: "completed" })).toBeGreaterThanOrEqual(1)
        expect(families.get("crm_relay_job_duration_seconds")?.type).toBe("HISTOGRAM")
      }))

    it.effect("GET /perform-list, answered before the router, keeps its server span: a caller's sampled traceparent is continued, the key check and its statement hang from it", () =>
      Effect.gen(function*() {
        const p = yield* Pipeline
        const receiver = yield* Receiver
        const accountId = ((yield* admin("POST", "/v1/accounts", { name: "Polled" })).json as Json)["id"] as string
        const key = ((yield* admin("POST", `/v1/accounts/${accountId}/keys`)).json as Json)["key"] as string
        const traceId = randomUUID().replaceAll("-", "")
        const callerSpan = "00f067aa0ba902b7"
        const answer = yield* request("GET", `${p.public}/perform-list?limit=2`, {
          headers: { authorization: `Bearer ${key}`, traceparent: `00-${traceId}-${callerSpan}-01`, "user-agent": "poller/1" }
        })
        expect(answer.status).toBe(200)
        const trace = yield* eventually(
          Effect.sync(() => receiver.spans().filter((s) => s.traceId === traceId)),
          (spans) => spans.some((s) => s.name === "http.server GET") && spans.some((s) => s.name === "IntegrationKeys.authorize")
        )
        const server = trace.find((s) => s.name === "http.server GET")!
        expect(server.parentSpanId).toBe(callerSpan)
        expect(server.attributes).toMatchObject({
          "http.route": "/perform-list",
          "http.request.method": "GET",
          "http.response.status_code": 200,
          "url.path": "/perform-list",
          "url.query": "limit=2",
          "user_agent.original": "poller/1"
        })
        // The key never reaches a span: the Authorization header is redacted as the platform does.
        expect(JSON.stringify(trace)).not.toContain(key)
        const byId = new Map(trace.map((s) => [s.spanId, s]))
        const parentName = (name: string) => byId.get(trace.find((s) => s.name === name)!.parentSpanId)?.name
        expect(parentName("IntegrationKeyAuth")).toBe("http.server GET")
        expect(parentName("IntegrationKeys.authorize")).toBe("IntegrationKeyAuth")
        expect(trace.some((s) => byId.get(s.parentSpanId)?.name === "IntegrationKeys.authorize" && s.name.startsWith("sql."))).toBe(true)
      }))
  })
})
