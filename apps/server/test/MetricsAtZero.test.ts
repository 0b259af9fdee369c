/**
 * Issue 40: every series the server knows is exported at 0 from the start,
 * so an operator can write an alert on a refusal counter before its first
 * refusal. The expected series are built here from the label values
 * declared next to each metric, under the family names the docs list.
 */
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as BridgeClient from "@crm-relay/bridge/BridgeClient"
import * as Egress from "@crm-relay/bridge/Egress"
import * as TokenCache from "@crm-relay/bridge/TokenCache"
import { Operations } from "@crm-relay/contract"
import * as OriginMetrics from "@crm-relay/events/OriginMetrics"
import * as JobQueue from "@crm-relay/store/JobQueue"
import * as Retention from "@crm-relay/store/Retention"
import { Effect } from "effect"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { ADMIN_TOKEN, bearer, request, TestServerLive, urls } from "./support/TestServer.js"

type Labels = Readonly<Record<string, string>>

/** One series: its family, type and labels. */
interface Expected {
  readonly family: string
  readonly type: "COUNTER" | "GAUGE"
  readonly labels: Labels
}

const counter = (family: string, labels: Labels = {}): Expected => ({ family, type: "COUNTER", labels })
const gauge = (family: string, labels: Labels = {}): Expected => ({ family, type: "GAUGE", labels })
const each = <V extends string>(values: ReadonlyArray<V>, make: (value: V) => Expected) => values.map(make)

const QUEUES = ["crm_push_jobs", "events", "deliveries", "subscription_recoveries"] as const
const TRANSPORTS = ["rest", "mcp"] as const

const expected: ReadonlyArray<Expected> = [
  ...each(Egress.REFUSAL_REASONS, (reason) => counter("crm_relay_egress_refusals_total", { reason })),
  ...each(["hit", "miss"], (result) => counter("crm_relay_oauth_token_cache_lookups_total", { result })),
  ...Operations.OPERATIONS.flatMap((operation) =>
    TRANSPORTS.flatMap((transport) =>
      each(BridgeClient.OUTCOMES, (outcome) => counter("crm_relay_bridge_exchanges_total", { operation, transport, outcome }))
    )
  ),
  ...QUEUES.flatMap((queue) => each(Object.values(JobQueue.JOB_RESULTS), (result) => counter("crm_relay_jobs_total", { queue, result }))),
  ...each(Retention.PRUNED_TABLES, (table) => counter("crm_relay_retention_pruned_rows_total", { table })),
  counter("crm_relay_retention_dropped_payloads_total"),
  ...each(Retention.KEPT_TABLES, (table) => gauge("crm_relay_retention_oldest_row_age_seconds", { table })),
  counter("crm_relay_rate_limit_refusals_total"),
  counter("crm_relay_failed_key_refusals_total"),
  counter("crm_relay_subscription_limit_refusals_total"),
  ...each(["public", "portal"], (listener) => counter(`crm_relay_${listener}_connections_refused_total`)),
  ...["public", "portal"].flatMap((listener) => each(["head", "request"], (phase) => counter(`crm_relay_${listener}_timeouts_total`, { phase }))),
  gauge("crm_relay_failing_origins"),
  ...each(OriginMetrics.PROBE_RESULTS, (result) => counter("crm_relay_origin_probes_total", { result }))
]

// The server's families that are not declared series: per-request HTTP series, and gauges (and the CPU
// counter) sampled at each scrape. Effect's own (`effect_fiber_*`) are not the server's.
const declaredFamily = (name: string) => name.startsWith("crm_relay_") && !/^crm_relay_(http_|process_|queue_)/.test(name)

const id = (family: string, labels: Labels) =>
  `${family}{${Object.keys(labels).sort().map((key) => `${key}=${labels[key]}`).join(",")}}`

describe("metrics at 0 from the start (issue 40)", () => {
  it.layer(TestServerLive)((it) => {
    it.effect("\"Every series the server knows is exported at 0 from the start\": the first scrape shows each declared series at 0, and no other", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const scraped = yield* request("GET", `${u.admin}/metrics`, { headers: bearer(ADMIN_TOKEN) })
        expect(scraped.status).toBe(200)
        const families = parsePrometheusTextFormat(scraped.text)

        const exported = new Map<string, { readonly type: string; readonly value: string | undefined }>()
        for (const family of families) {
          if (!declaredFamily(family.name)) continue
          for (const sample of family.metrics) exported.set(id(family.name, sample.labels ?? {}), { type: family.type, value: sample.value })
        }
        const wanted = new Map(expected.map((series) => [id(series.family, series.labels), series.type]))
        expect(wanted.size).toBe(expected.length)
        // Present, typed and at 0 ...
        for (const [series, type] of wanted) expect({ series, ...exported.get(series) }).toEqual({ series, type, value: "0" })
        // ... and nothing else: a series counted under an undeclared label value would show here.
        expect([...exported.keys()].filter((series) => !wanted.has(series))).toEqual([])
      }))
  })

  it("the label values are closed sets: the counters are found by declared value only, and a value outside the set fails typecheck", () => {
    expectTypeOf<keyof typeof Egress.refusalsByReason>().toEqualTypeOf<Egress.RefusalReason>()
    expectTypeOf(Egress.refusalsByReason).not.toHaveProperty("made_up")
    expectTypeOf<keyof typeof TokenCache.lookupsByResult>().toEqualTypeOf<"hit" | "miss">()
    expectTypeOf<keyof BridgeClient.TransportSeries>().toEqualTypeOf<Operations.OperationName>()
    expectTypeOf<keyof BridgeClient.TransportSeries["leads.create"]>().toEqualTypeOf<BridgeClient.Outcome>()
    expectTypeOf<keyof ReturnType<typeof JobQueue.jobSeriesOf>>().toEqualTypeOf<keyof typeof JobQueue.JOB_RESULTS>()
    expectTypeOf<keyof typeof Retention.prunedRowsByTable>().toEqualTypeOf<Retention.PrunedTable>()
    expectTypeOf<keyof typeof Retention.oldestKeptByTable>().toEqualTypeOf<Retention.KeptTable>()
    expectTypeOf<keyof typeof OriginMetrics.originProbesByResult>().toEqualTypeOf<"recovered" | "failed">()
    expectTypeOf(OriginMetrics.originProbesByResult).not.toHaveProperty("timeout")
    // At run time too: one counter per declared value, nothing more.
    expect(Object.keys(Egress.refusalsByReason)).toEqual([...Egress.REFUSAL_REASONS])
    expect(Object.keys(OriginMetrics.originProbesByResult)).toEqual(["recovered", "failed"])
    expect(Object.keys(BridgeClient.exchangeSeries("rest"))).toEqual([...Operations.OPERATIONS])
  })
})
