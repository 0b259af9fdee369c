import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, MetricBoundaries } from "effect"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { serialize } from "../src/observability/prometheus.js"

const only = (prefix: string) => Metric.unsafeSnapshot().filter((pair) => pair.metricKey.name.startsWith(prefix))

describe("Prometheus text exposition of Effect's metric snapshot", () => {
  it.effect("counters and gauges: HELP and TYPE once per family, label values escaped (backslash, quote, newline) and read back exactly", () =>
    Effect.gen(function*() {
      const counter = Metric.counter("test_exposition_requests_total", { description: "Requests.\nSecond line \\ here", incremental: true })
      const odd = "a \"quoted\" \\ value\nnext"
      yield* Metric.increment(Metric.tagged(counter, "path", odd))
      yield* Metric.incrementBy(Metric.tagged(counter, "path", "/plain"), 2)
      yield* Metric.set(Metric.gauge("test_exposition_depth", { description: "Depth." }), 7.5)

      const text = serialize(only("test_exposition_"))
      expect(text.match(/^# TYPE test_exposition_requests_total counter$/gm)).toHaveLength(1)
      expect(text).toContain("# HELP test_exposition_requests_total Requests.\\nSecond line \\\\ here\n")
      const families = parsePrometheusTextFormat(text)
      expect(families.map((f) => [f.name, f.type])).toEqual([["test_exposition_depth", "GAUGE"], ["test_exposition_requests_total", "COUNTER"]])
      const requests = families[1]!.metrics.map((m) => [m.labels?.["path"], m.value])
      expect(requests).toEqual(expect.arrayContaining([[odd, "1"], ["/plain", "2"]]))
      expect(families[0]!.metrics).toEqual([{ value: "7.5" }])
    }))

  it.effect("histograms: cumulative `le` buckets ending at +Inf, `_sum` and `_count`", () =>
    Effect.gen(function*() {
      const histogram = Metric.histogram("test_exposition_seconds", MetricBoundaries.fromIterable([0.1, 1]), "Latency.")
      for (const value of [0.0625, 0.5, 0.75, 3]) yield* Metric.update(histogram, value)
      const text = serialize(only("test_exposition_seconds"))
      expect(text).toBe([
        "# HELP test_exposition_seconds Latency.",
        "# TYPE test_exposition_seconds histogram",
        "test_exposition_seconds_bucket{le=\"0.1\"} 1",
        "test_exposition_seconds_bucket{le=\"1\"} 3",
        "test_exposition_seconds_bucket{le=\"+Inf\"} 4",
        "test_exposition_seconds_sum 4.3125",
        "test_exposition_seconds_count 4",
        ""
      ].join("\n"))
      const [family] = parsePrometheusTextFormat(text)
      expect(family).toMatchObject({ type: "HISTOGRAM", metrics: [{ buckets: { "0.1": "1", "1": "3", "+Inf": "4" }, count: "4", sum: "4.3125" }] })
    }))
})
