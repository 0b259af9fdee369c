/**
 * One access line and the HTTP metrics per request, as a middleware of
 * `serveApi`: the API, method, route template (never the raw path, so ids and
 * keys in paths stay out), status, duration and the account once the request
 * authenticated. The request runs acting as the API's actor (see Audit) until
 * its authentication names a better one.
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerError, HttpServerRequest } from "@effect/platform"
import * as Audit from "@crm-relay/store/Audit"
import { Context, Effect, Exit, type Fiber, FiberRef, LogLevel, Metric, MetricBoundaries, MetricKey, MetricLabel, Option, Tracer } from "effect"
import { performance } from "node:perf_hooks"
import * as RefusalLog from "./RefusalLog.js"

/** Requests answered, by API, method, route template and status. */
const requestsKey = MetricKey.counter("crm_relay_http_requests_total", {
  description: "HTTP requests answered, by API (public, internal), method, route template and status.",
  incremental: true
})
/** Time from the request head to the response written, by API, method, route template and status. */
const durationKey = MetricKey.histogram(
  "crm_relay_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "HTTP request latency in seconds, by API, method, route template and status."
)

interface Instruments {
  readonly requests: Metric.Metric.Counter<number>
  readonly seconds: Metric.Metric.Histogram<number>
}

/** The value of `key` in `map`, made by `make` the first time. */
const entry = <K, V>(map: Map<K, V>, key: K, make: () => V): V => {
  let value = map.get(key)
  if (value === undefined) {
    value = make()
    map.set(key, value)
  }
  return value
}

// Tagging a metric per update would rebuild its key every time: one pair per label set, built once,
// found by its labels one by one (joining them into one key cost a string per request).
const instruments = new Map<string, Map<string, Map<string, Map<number, Instruments>>>>()
const instrumentsFor = (api: string, method: string, route: string, status: number): Instruments => {
  const byStatus = entry(entry(entry(instruments, api, () => new Map()), method, () => new Map()), route, () => new Map())
  let found = byStatus.get(status)
  if (found === undefined) {
    const labels = [
      MetricLabel.make("api", api),
      MetricLabel.make("method", method),
      MetricLabel.make("route", route),
      MetricLabel.make("status", String(status))
    ]
    found = {
      requests: Metric.fromMetricKey(MetricKey.taggedWithLabels(requestsKey, labels)),
      seconds: Metric.fromMetricKey(MetricKey.taggedWithLabels(durationKey, labels))
    }
    byStatus.set(status, found)
  }
  return found
}

const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

/** The route label of a request no route matched (one series, whatever the path). */
export const UNMATCHED = "unmatched"

/** The account id a route template names in its path (`/v1/accounts/:id/...`), if any. */
const accountInPath = (route: string, url: string): string | undefined => {
  if (!route.startsWith("/v1/accounts/:id")) return undefined
  return url.split("?", 1)[0]!.split("/")[3]
}

/** Counts one answered request in the HTTP metrics (for answers given before this middleware runs). */
export const observe = (api: string, method: string, route: string, status: number, seconds: number): void => {
  const metrics = instrumentsFor(api, method, route, status)
  metrics.requests.unsafeUpdate(1, NO_TAGS)
  metrics.seconds.unsafeUpdate(seconds, NO_TAGS)
}

/** A request answered: what its access line and metrics say. */
export interface Answered {
  readonly api: string
  readonly method: string
  /** The route template, or `UNMATCHED`. */
  readonly route: string
  readonly status: number
  readonly seconds: number
  readonly accountId: string | undefined
  /** The client address (named on a 429's throttled line). */
  readonly address: string | undefined
}

/**
 * Counts `answered` in the HTTP metrics and writes its access line when the log level of
 * `fiber` (the request's) lets Info through. A flood of 429s (a rate limit holding) writes one
 * line per client address per minute (`refusals`), not one per request.
 */
export const record = (fiber: Fiber.RuntimeFiber<unknown, unknown>, refusals: RefusalLog.RefusalLog, answered: Answered): Effect.Effect<void> => {
  const { api, method, route, status, seconds, accountId } = answered
  observe(api, method, route, status, seconds)
  // Below LOG_LEVEL the line would be dropped anyway: no fields, annotations or log call per request.
  if (LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Info)) return Effect.void
  const fields: Record<string, unknown> = {
    log: "access",
    api,
    method,
    route,
    status,
    duration_ms: Math.round(seconds * 100_000) / 100
  }
  if (accountId !== undefined) fields["account_id"] = accountId
  if (status === 429) {
    const address = answered.address ?? "unknown"
    const leftOut = refusals(address, Date.now())
    if (leftOut === undefined) return Effect.void
    fields["client_address"] = address
    fields["refusals_left_out"] = leftOut
  }
  return Effect.annotateLogs(Effect.logInfo("http request"), fields)
}

/** The middleware for the API named `api`, whose requests act as `actor` until authenticated (see `record`). */
export const accessLog = (api: string, actor: string, refusals: RefusalLog.RefusalLog = RefusalLog.make()) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const context = fiber.currentContext
    const request = Context.unsafeGet(context, HttpServerRequest.HttpServerRequest)
    // The server span of the platform's tracer middleware; its router names the matched route on it.
    const span = Context.getOrElse(context, Tracer.ParentSpan, () => undefined)
    const acting: Audit.Acting = { actor, accountId: undefined }
    const started = performance.now()
    return Effect.onExit(Audit.actingAs(acting)(app), (exit) => {
      const seconds = (performance.now() - started) / 1000
      const status = Exit.isSuccess(exit) ? exit.value.status : HttpServerError.causeResponseStripped(exit.cause)[0].status
      const matched = span?._tag === "Span" ? span.attributes.get("http.route") : undefined
      const route = typeof matched === "string" ? matched : UNMATCHED
      return record(fiber, refusals, {
        api,
        method: request.method,
        route,
        status,
        seconds,
        accountId: acting.accountId ?? accountInPath(route, request.url),
        address: Option.getOrUndefined(request.remoteAddress)
      })
    })
  })
