/**
 * The metrics of failing destinations: how many receiver origins (webhooks)
 * and broker hosts (RabbitMQ, NATS) are held as failing now, and how their
 * probes end. Declared here, each series exported at 0 from the start, for the
 * delivery side that holds and probes origins to update.
 */
import { Metric } from "effect"

/** Receiver origins and broker hosts currently held as failing (metric): set it whenever the held set changes. */
export const failingOrigins = Metric.gauge("crm_relay_failing_origins", {
  description: "Receiver origins and broker hosts currently held as failing (their deliveries wait for a probe)."
})

/** How a probe of a failing origin ended: the `result` label's values of `originProbes`. */
export const PROBE_RESULTS = ["recovered", "failed"] as const
/** How a probe of a failing origin ended. */
export type ProbeResult = typeof PROBE_RESULTS[number]

/** Probes of origins held as failing, by result (metric). */
export const originProbes = Metric.counter("crm_relay_origin_probes_total", {
  description: "Probes of receiver origins or broker hosts held as failing, by result: recovered (no longer held) or failed (still held).",
  incremental: true
})
/** The probe counter of each result: increment `originProbesByResult[result]`, never a tag of your own. */
export const originProbesByResult = Object.fromEntries(
  PROBE_RESULTS.map((result) => [result, Metric.tagged(originProbes, "result", result)])
) as { readonly [R in ProbeResult]: Metric.Metric.Counter<number> }
