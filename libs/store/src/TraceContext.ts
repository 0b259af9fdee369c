/**
 * W3C trace context (`traceparent`) stored with a job, so the worker that
 * runs it continues the trace of the request that queued it: one call, one
 * trace, across the job queue.
 */
import { Effect, Option, Tracer } from "effect"

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The `traceparent` of a span: version 00, its trace and span ids, sampled flag. */
export const format = (span: Tracer.AnySpan): string => `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/** The span a stored `traceparent` names, to continue its trace; none when absent or malformed. */
export const parse = (traceparent: string | null | undefined): Option.Option<Tracer.ExternalSpan> => {
  const match = TRACEPARENT.exec(traceparent ?? "")
  if (match === null || match[1] === "0".repeat(32) || match[2] === "0".repeat(16)) return Option.none()
  return Option.some(Tracer.externalSpan({ traceId: match[1]!, spanId: match[2]!, sampled: (parseInt(match[3]!, 16) & 1) === 1 }))
}

/** The `traceparent` of the current span, or null outside any span (the column's value). */
export const current: Effect.Effect<string | null> = Effect.map(Effect.currentParentSpan, format).pipe(
  Effect.orElseSucceed(() => null)
)
