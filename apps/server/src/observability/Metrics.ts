/**
 * `GET /metrics` on the internal port: Prometheus text exposition of every
 * metric of Effect's `Metric` registry (each defined next to what it counts:
 * HTTP requests in the access middleware, bridge exchanges, egress refusals
 * and the OAuth token cache in @crm-relay/bridge, rate-limit refusals and
 * deliveries in @crm-relay/events, job runs and retention in @crm-relay/store), plus
 * gauges computed at each scrape: the job queues' depth and oldest due job
 * (one statement per queue) and the process (memory, CPU, event loop).
 * Every declared series (Series) is there from the start, at 0.
 * Guarded like the rest of the internal API: Bearer ADMIN_TOKEN.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as SqlClient from "@effect/sql/SqlClient"
import * as EventApiLive from "@crm-relay/events/EventApiLive"
import * as OriginHealth from "@crm-relay/events/OriginHealth"
import * as OriginMetrics from "@crm-relay/events/OriginMetrics"
import * as JobQueue from "@crm-relay/store/JobQueue"
import { Effect, Metric, type Redacted } from "effect"
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from "node:perf_hooks"
import * as Heap from "../config/Heap.js"
import * as InternalApiLive from "../http/internal/InternalApiLive.js"
import { CONTENT_TYPE, serialize } from "./prometheus.js"
import * as Series from "./Series.js"

/** The job queues' tables: the `queue` label, as on `crm_relay_jobs_total`. */
const queues = ["crm_push_jobs", "events", "deliveries"] as const

const pendingJobs = Metric.gauge("crm_relay_queue_pending_jobs", {
  description: "Pending jobs of a queue (due, running or scheduled for later), at scrape time."
})
const dueJobs = Metric.gauge("crm_relay_queue_due_jobs", {
  description: "Jobs of a queue that are due now and held by no live lease, at scrape time."
})
const oldestDue = Metric.gauge("crm_relay_queue_oldest_due_age_seconds", {
  description: "Seconds since the oldest due, unclaimed job of a queue became due (0 when none is)."
})
const queueGauges = queues.map((queue) => ({
  table: queue,
  pending: Metric.tagged(pendingJobs, "queue", queue),
  due: Metric.tagged(dueJobs, "queue", queue),
  oldest: Metric.tagged(oldestDue, "queue", queue)
}))

const rss = Metric.gauge("crm_relay_process_resident_memory_bytes", { description: "Resident set size of the process in bytes." })
const heapUsed = Metric.gauge("crm_relay_process_heap_used_bytes", { description: "V8 heap in use, in bytes." })
const heapTotal = Metric.gauge("crm_relay_process_heap_total_bytes", { description: "V8 heap allocated, in bytes." })
const heapYoung = Metric.gauge("crm_relay_process_heap_young_generation_bytes", {
  description: "V8's young generation (both semi-spaces), in bytes; HEAP_SEMI_SPACE_MIB bounds it."
})
const cpu = Metric.counter("crm_relay_process_cpu_seconds_total", { description: "CPU time of the process (user and system), in seconds." })
const utilization = Metric.gauge("crm_relay_process_event_loop_utilization", {
  description: "Share of time the event loop was busy since the previous scrape (0 to 1)."
})
const lagMean = Metric.gauge("crm_relay_process_event_loop_lag_mean_seconds", {
  description: "Mean event loop delay since the previous scrape, in seconds."
})
const lagP99 = Metric.gauge("crm_relay_process_event_loop_lag_p99_seconds", {
  description: "99th percentile of the event loop delay since the previous scrape, in seconds."
})

// Process samples: the delay monitor starts at the first scrape (nothing runs for it before).
let delay: ReturnType<typeof monitorEventLoopDelay> | undefined
let lastUtilization: EventLoopUtilization | undefined
let lastCpuMicros = 0

const sampleProcess = Effect.suspend(() => {
  const memory = process.memoryUsage()
  const usage = process.cpuUsage()
  const cpuMicros = usage.user + usage.system
  const cpuDelta = (cpuMicros - lastCpuMicros) / 1e6
  lastCpuMicros = cpuMicros
  const elu = performance.eventLoopUtilization(lastUtilization)
  lastUtilization = performance.eventLoopUtilization()
  const lag = delay
  if (delay === undefined) {
    delay = monitorEventLoopDelay({ resolution: 20 })
    delay.enable()
  }
  const mean = lag === undefined || lag.count === 0 ? 0 : lag.mean / 1e9
  const p99 = lag === undefined || lag.count === 0 ? 0 : lag.percentile(99) / 1e9
  lag?.reset()
  return Effect.all([
    Metric.set(rss, memory.rss),
    Metric.set(heapUsed, memory.heapUsed),
    Metric.set(heapTotal, memory.heapTotal),
    Metric.set(heapYoung, Heap.youngGenerationBytes()),
    Metric.incrementBy(cpu, cpuDelta),
    Metric.set(utilization, elu.utilization),
    Metric.set(lagMean, mean),
    Metric.set(lagP99, p99)
  ], { discard: true })
})

const sampleQueues = Effect.forEach(queueGauges, (gauges) =>
  Effect.flatMap(JobQueue.depth(gauges.table), (depth) =>
    Effect.all([
      Metric.set(gauges.pending, depth.pending),
      Metric.set(gauges.due, depth.due),
      Metric.set(gauges.oldest, depth.oldestDueSeconds)
    ], { discard: true })), { discard: true })

// Held origins are the fleet's state (a row each in the database), counted at the scrape like the queues.
const sampleOrigins = Effect.flatMap(Effect.orDie(OriginHealth.heldCount), (held) => Metric.set(OriginMetrics.failingOrigins, held))

/** The exposition now: the scrape-time gauges refreshed, then every metric of the registry. */
export const scrape: Effect.Effect<string, never, SqlClient.SqlClient> = Effect.zipRight(
  Effect.all([sampleQueues, sampleOrigins, sampleProcess], { discard: true }),
  Effect.sync(() => serialize(Metric.unsafeSnapshot()))
).pipe(Effect.withSpan("Metrics.scrape"))

/** GET /metrics on the internal API's router, for `token` (Bearer, as the rest of the internal API). */
export const route = (token: Redacted.Redacted<string>) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      // Declared when the internal API starts: the first scrape already shows every series.
      yield* Series.declare
      const sql = yield* SqlClient.SqlClient
      const allowed = InternalApiLive.tokenCheck(token)
      const unauthorized = HttpServerResponse.unsafeJson({ error: InternalApiLive.messages.unauthorized }, { status: 401 })
      yield* router.get(
        "/metrics",
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          allowed(EventApiLive.bearerToken(request.headers["authorization"]))
            ? Effect.map(Effect.provideService(scrape, SqlClient.SqlClient, sql), (text) =>
              HttpServerResponse.text(text, { contentType: CONTENT_TYPE }))
            : Effect.succeed(unauthorized))
      )
    })
  )
