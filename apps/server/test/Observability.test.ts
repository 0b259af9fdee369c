import { describe, expect, it } from "@effect/vitest"
import { Eventually } from "@crm-relay/testing"
import { Effect, Layer, Option } from "effect"
import parsePrometheusTextFormat, { type Family } from "parse-prometheus-text-format"
import * as LogCapture from "./support/LogCapture.js"
import { ADMIN_TOKEN, adminRequest, bearer, jsonWith, request, TestServerLive, urls } from "./support/TestServer.js"

const capture = LogCapture.make()
const ServerWithLogs = TestServerLive.pipe(Layer.provide(capture.layer))

const HEX32 = /^[0-9a-f]{32}$/
const HEX16 = /^[0-9a-f]{16}$/

/** The access line of the request that matches, once it is written. */
const accessLine = (match: (line: Record<string, unknown>) => boolean) =>
  Effect.gen(function*() {
    yield* Eventually.eventually(Effect.map(LogCapture.ofKind(capture, "access"), (lines) => lines.some(match)))
    return (yield* LogCapture.ofKind(capture, "access")).findLast(match)!
  })

const scrape = Effect.flatMap(urls, (u) => request("GET", `${u.admin}/metrics`, { headers: bearer(ADMIN_TOKEN) }))

const families = (text: string): ReadonlyMap<string, Family> => new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]))

/** The value of the sample of `family` whose labels include `labels`, 0 when there is none. */
const sampleValue = (all: ReadonlyMap<string, Family>, family: string, labels: Record<string, string>): number => {
  const sample = all.get(family)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
  return sample === undefined ? 0 : Number(sample.value ?? sample.count)
}

describe("logs", () => {
  it.layer(ServerWithLogs)((it) => {
    it.effect("stdout is JSON lines of one flat shape: time, level, msg first; no fiberId, no spans; trace_id and span_id inside a span", () =>
      Effect.gen(function*() {
        const u = yield* urls
        expect((yield* request("GET", `${u.admin}/healthz`)).status).toBe(200)
        yield* accessLine((line) => line["route"] === "/healthz")
        const lines = capture.lines()
        expect(lines.length).toBeGreaterThan(0)
        for (const line of lines) {
          expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "msg"])
          expect(new Date(String(line["time"])).toISOString()).toBe(line["time"])
          expect(["trace", "debug", "info", "warn", "error", "fatal"]).toContain(line["level"])
          expect(line).not.toHaveProperty("fiberId")
          expect(line).not.toHaveProperty("spans")
          expect(line).not.toHaveProperty("annotations")
        }
        const health = yield* accessLine((line) => line["route"] === "/healthz")
        expect(health["trace_id"]).toMatch(HEX32)
        expect(health["span_id"]).toMatch(HEX16)
      }))

    it.effect("one access line per request on each API: method, route template, status, duration_ms, account id; never a key, token or body", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const account = (yield* adminRequest(u.admin, "POST", "/v1/accounts", { name: "Logged Plumbing" })).json as { id: string }
        const key = (yield* adminRequest(u.admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { id: string; key: string }
        const targetUrl = "https://hooks.example.com/secret-path-in-body"
        const subscribed = yield* request("POST", `${u.public}/subscribe`, { headers: jsonWith(key.key), body: JSON.stringify({ targetUrl }) })
        expect(subscribed.status).toBe(201)
        const subscription = (subscribed.json as { id: string }).id
        expect((yield* request("DELETE", `${u.public}/subscribe/${subscription}`, { headers: bearer(key.key) })).status).toBe(204)
        expect((yield* request("GET", `${u.public}/nope`)).status).toBe(404)

        const created = yield* accessLine((line) => line["api"] === "internal" && line["route"] === "/v1/accounts/:id/keys" && line["account_id"] === account.id)
        expect(created).toMatchObject({ level: "info", method: "POST", status: 201 })
        expect(typeof created["duration_ms"]).toBe("number")
        const subscribe = yield* accessLine((line) => line["api"] === "public" && line["route"] === "/subscribe")
        expect(subscribe).toMatchObject({ method: "POST", status: 201, account_id: account.id })
        const unsubscribe = yield* accessLine((line) => line["api"] === "public" && line["method"] === "DELETE")
        // The route template, not the path: the subscription id stays out of the label.
        expect(unsubscribe).toMatchObject({ route: "/subscribe/:id", status: 204, account_id: account.id })
        const unknown = yield* accessLine((line) => line["api"] === "public" && line["status"] === 404)
        expect(unknown).toMatchObject({ method: "GET", route: "unmatched" })
        expect(unknown).not.toHaveProperty("account_id")

        const everything = capture.raw.join("\n")
        for (const secret of [key.key, ADMIN_TOKEN, targetUrl]) expect(everything).not.toContain(secret)
      }))

    it.effect("one audit line per change, naming who did it: the admin token on the internal API, the integration key on the Event API", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const account = (yield* adminRequest(u.admin, "POST", "/v1/accounts", { name: "Audited" })).json as { id: string }
        const key = (yield* adminRequest(u.admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { id: string; key: string }
        const subscribed = yield* request("POST", `${u.public}/subscribe`, {
          headers: jsonWith(key.key),
          body: JSON.stringify({ targetUrl: "https://hooks.example.com/a", event: "lead" })
        })
        const subscription = (subscribed.json as { id: string }).id
        yield* request("DELETE", `${u.public}/subscribe/${subscription}`, { headers: bearer(key.key) })
        yield* adminRequest(u.admin, "POST", `/v1/keys/${key.id}/disable`)

        const mine = (line: Record<string, unknown>) => line["account_id"] === account.id || line["key_id"] === key.id
        yield* Eventually.eventually(Effect.map(LogCapture.ofKind(capture, "audit"), (lines) => lines.filter(mine).length === 5))
        const audit = (yield* LogCapture.ofKind(capture, "audit")).filter(mine)
        expect(audit.map((line) => [line["action"], line["actor"]])).toEqual([
          ["account.created", "admin_token"],
          ["key.created", "admin_token"],
          ["subscription.created", `integration_key:${key.id}`],
          ["subscription.removed", `integration_key:${key.id}`],
          ["key.disabled", "admin_token"]
        ])
        expect(audit[2]).toMatchObject({ subscription_id: subscription, event: "lead", level: "info" })
        for (const line of audit) {
          expect(line["trace_id"]).toMatch(HEX32)
          expect(JSON.stringify(line)).not.toContain(key.key)
        }
      }))
  })
})

describe("GET /metrics", () => {
  it.layer(TestServerLive)((it) => {
    it.effect("needs the admin token: 401 with the Error object without it", () =>
      Effect.gen(function*() {
        const u = yield* urls
        for (const headers of [{}, bearer("wrong")]) {
          const answer = yield* request("GET", `${u.admin}/metrics`, { headers })
          expect([answer.status, answer.json]).toEqual([401, { error: "The admin token is missing or wrong." }])
        }
        const publicPort = yield* request("GET", `${u.public}/metrics`, { headers: bearer(ADMIN_TOKEN) })
        expect(publicPort.status).toBe(404)
      }))

    it.effect("Prometheus text a parser reads: HTTP, queue, job, rate-limit and process families, with labels, and counts that move after real requests", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const account = (yield* adminRequest(u.admin, "POST", "/v1/accounts", { name: "Scraped" })).json as { id: string }
        const key = (yield* adminRequest(u.admin, "POST", `/v1/accounts/${account.id}/keys`)).json as { key: string }
        const perform = { api: "public", method: "GET", route: "/perform-list", status: "200" }

        const first = yield* scrape
        expect(first.status).toBe(200)
        expect(first.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
        const before = families(first.text)
        for (let i = 0; i < 3; i++) {
          expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key.key) })).status).toBe(200)
        }
        // 60 per key per minute: the next ones are refused.
        for (let i = 0; i < 58; i++) yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key.key) })
        expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key.key) })).status).toBe(429)

        // The access line (and the count) is written after the response: wait for it.
        let after = before
        let text = ""
        yield* Eventually.eventually(Effect.map(scrape, (answer) => {
          text = answer.text
          after = families(answer.text)
          return sampleValue(after, "crm_relay_http_requests_total", perform) - sampleValue(before, "crm_relay_http_requests_total", perform) === 60
        }))

        const requests = after.get("crm_relay_http_requests_total")!
        expect(requests.type).toBe("COUNTER")
        expect(requests.help).not.toBe("")
        expect(sampleValue(after, "crm_relay_http_requests_total", { ...perform, status: "429" })).toBeGreaterThanOrEqual(1)
        expect(sampleValue(after, "crm_relay_http_requests_total", { api: "internal", method: "POST", route: "/v1/accounts", status: "201" }))
          .toBeGreaterThanOrEqual(1)
        const latency = after.get("crm_relay_http_request_duration_seconds")!
        expect(latency.type).toBe("HISTOGRAM")
        expect(Object.keys(latency.metrics[0]?.buckets ?? {})).toContain("+Inf")
        // The parser folds a labelled histogram's series into one: read this series' lines directly.
        const series = `{api="public",method="GET",route="/perform-list",status="200"`
        const count = new RegExp(`^crm_relay_http_request_duration_seconds_count${series}} (\\d+)$`, "m").exec(text)
        const inf = new RegExp(`^crm_relay_http_request_duration_seconds_bucket${series},le="\\+Inf"} (\\d+)$`, "m").exec(text)
        expect(Number(count?.[1])).toBe(sampleValue(after, "crm_relay_http_requests_total", perform))
        expect(Number(inf?.[1])).toBe(Number(count?.[1]))

        expect(sampleValue(after, "crm_relay_rate_limit_refusals_total", {}) - sampleValue(before, "crm_relay_rate_limit_refusals_total", {}))
          .toBeGreaterThanOrEqual(1)
        for (const queue of ["crm_push_jobs", "deliveries"]) {
          for (const name of ["crm_relay_queue_pending_jobs", "crm_relay_queue_due_jobs", "crm_relay_queue_oldest_due_age_seconds"]) {
            const family = after.get(name)!
            expect(family.type).toBe("GAUGE")
            expect(family.metrics.some((m) => m.labels?.["queue"] === queue)).toBe(true)
          }
        }
        for (const name of ["crm_relay_process_resident_memory_bytes", "crm_relay_process_heap_used_bytes", "crm_relay_process_event_loop_utilization"]) {
          expect(after.get(name)?.type).toBe("GAUGE")
        }
        expect(sampleValue(after, "crm_relay_process_heap_young_generation_bytes", {})).toBeGreaterThan(0)
        expect(sampleValue(after, "crm_relay_process_resident_memory_bytes", {})).toBeGreaterThan(0)
        expect(after.get("crm_relay_process_cpu_seconds_total")?.type).toBe("COUNTER")
        expect(sampleValue(after, "crm_relay_process_cpu_seconds_total", {})).toBeGreaterThan(0)
        expect(Option.fromNullable(after.get("crm_relay_http_requests_total")?.metrics.find((m) => m.labels?.["route"] === "/metrics"))._tag)
          .toBe("Some")
      }))
  })
})
