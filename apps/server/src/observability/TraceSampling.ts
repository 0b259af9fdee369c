/**
 * Sampled tracing: whether a trace is recorded is decided once, at its root
 * span — with probability `ratio`, or as the caller's W3C `traceparent`
 * says — and its spans follow their parent. The spans of a trace that is not
 * recorded are light stand-ins: they keep a trace id and a span id (so log
 * lines still correlate) but never reach the real tracer, so a hot path pays
 * for no events or export. A stand-in keeps only the attributes something
 * reads back (`KEPT`: the access log reads the router's `http.route`), so
 * that reader sees the same as on a recorded span while the dozen others
 * written per request (URL, headers, SQL text) cost nothing.
 */
import { Effect, Layer, Option, Tracer } from "effect"
import { randomBytes } from "node:crypto"
import type * as Context from "effect/Context"
import type * as Exit from "effect/Exit"
import type * as Settings from "../config/Settings.js"

// Ids of stand-ins: a random per-process prefix and a counter, so making one costs no randomness.
const idPrefix = randomBytes(8).toString("hex")
let idCounter = 0
const nextId = (): string => (idCounter = (idCounter + 1) % 0x100000000).toString(16).padStart(8, "0")
const nextSpanId = (): string => `${idPrefix.slice(0, 8)}${nextId()}`
const newTraceId = (): string => `${idPrefix}${nextId()}${nextId()}`
const noAttributes: ReadonlyMap<string, unknown> = new Map()
const noLinks: ReadonlyArray<Tracer.SpanLink> = []
/** The attributes a stand-in keeps: those read back from spans (accessLog). */
const KEPT: ReadonlySet<string> = new Set(["http.route"])

/** A span of a trace that is not recorded: ids and the kept attributes only, events and links ignored. */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly spanId = nextSpanId()
  readonly traceId: string
  private written: Map<string, unknown> | undefined = undefined
  readonly links = noLinks
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly kind: Tracer.SpanKind,
    startTime: bigint
  ) {
    this.traceId = parent._tag === "Some" ? parent.value.traceId : newTraceId()
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Started") this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  get attributes(): ReadonlyMap<string, unknown> {
    return this.written ?? noAttributes
  }
  attribute(key: string, value: unknown): void {
    if (!KEPT.has(key)) return
    if (this.written === undefined) this.written = new Map()
    this.written.set(key, value)
  }
  event(): void {}
  addLinks(): void {}
}

/** `tracer`, recording a fraction `ratio` (0..1) of root traces and following the parent's decision below them. */
export const sampled = (tracer: Tracer.Tracer, ratio: number): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) =>
      (parent._tag === "Some" ? parent.value.sampled : Math.random() < ratio)
        ? tracer.span(name, parent, context, links, startTime, kind, options)
        : new UnsampledSpan(name, parent, context, kind, startTime),
    // Called around every operation of every fiber: the tracer's own, not a call more.
    context: tracer.context.bind(tracer)
  })

/**
 * The share of new traces recorded under the tracing settings: OTEL_TRACES_SAMPLER_ARG when traces are
 * exported, none when no endpoint is set (nothing but the exporter reads a recorded span; recording one
 * request in ten cost the Event API about 6 % of its CPU for nothing). A caller's `traceparent` still
 * decides for its own trace, so the flag passed on downstream stays the caller's.
 */
export const recordedShare = (settings: Pick<Settings.TracingSettings, "otlpEndpoint" | "sampleRatio">): number =>
  Option.isSome(settings.otlpEndpoint) ? settings.sampleRatio : 0

/** Wraps the tracer in place when this Layer is built (provide it after any Layer that sets the tracer). */
export const layer = (ratio: number): Layer.Layer<never> =>
  ratio >= 1 ? Layer.empty : Layer.unwrapEffect(Effect.map(Effect.tracer, (tracer) => Layer.setTracer(sampled(tracer, ratio))))
