import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, TestClock, Tracer } from "effect"
import * as Spans from "../src/Spans.js"

/** The default tracer, keeping every span it makes (in order). */
const recording = Effect.map(Effect.tracer, (base) => {
  const made: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (...args) => {
      const span = base.span(...args)
      made.push(span)
      return span
    },
    context: (f, fiber) => base.context(f, fiber)
  })
  return { made, tracer }
})

/** What a test compares of a span: everything a tracer is given, and how it ended. */
const shape = (span: Tracer.Span) => ({
  name: span.name,
  kind: span.kind,
  parent: Option.map(span.parent, (parent) => parent.spanId),
  attributes: Object.fromEntries(span.attributes),
  links: span.links.map((link) => ({ spanId: link.span.spanId, attributes: link.attributes })),
  ended: span.status._tag === "Ended",
  exit: span.status._tag === "Ended" ? Exit.isSuccess(span.status.exit) : undefined
})

const unsampled = Tracer.externalSpan({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", sampled: false })
const linked = Tracer.externalSpan({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", sampled: true })

describe("Spans.hot", () => {
  it.effect("makes the span Effect.withSpan makes: name, parent, kind, annotations, links, end", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      const run = (wrap: (self: Effect.Effect<Option.Option<Tracer.Span>>) => Effect.Effect<Option.Option<Tracer.Span>>) =>
        wrap(Effect.option(Effect.currentSpan)).pipe(
          Effect.annotateSpans("request.kind", "perform-list"),
          Effect.linkSpans(linked, { reason: "test" }),
          Effect.withSpan("root", { captureStackTrace: false }),
          Effect.withTracer(tracer)
        )
      const viaHot = yield* run(Spans.hot("child"))
      const viaWithSpan = yield* run(Effect.withSpan("child", { captureStackTrace: false }))
      expect(made.map((span) => span.name)).toEqual(["root", "child", "root", "child"])
      const [hotRoot, hotChild, , child] = made as [Tracer.Span, Tracer.Span, Tracer.Span, Tracer.Span]
      // Inside, the span is the current span, as withSpan's is.
      expect(Option.getOrThrow(viaHot)).toBe(hotChild)
      expect(Option.getOrThrow(viaWithSpan)).toBe(child)
      expect(Option.getOrThrow(hotChild.parent)).toBe(hotRoot)
      const { parent: _a, ...hot } = shape(hotChild)
      const { parent: _b, ...plain } = shape(child)
      expect(hot).toEqual(plain)
      expect(hot).toMatchObject({ kind: "internal", attributes: { "request.kind": "perform-list" }, ended: true, exit: true })
      expect(hot.links).toEqual([{ spanId: linked.spanId, attributes: { reason: "test" } }])
      expect(hotRoot.status._tag).toBe("Ended")
    }))

  it.effect("is the parent of the effect's own spans, and the parent span is current again after it", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      const after = yield* Effect.withSpan("sql.execute", { captureStackTrace: false })(Effect.void).pipe(
        Spans.hot("IntegrationKeys.authorize"),
        Effect.zipRight(Effect.currentSpan),
        Effect.withSpan("http.server GET", { captureStackTrace: false }),
        Effect.withTracer(tracer)
      )
      const byName = new Map(made.map((span) => [span.name, span]))
      expect(Option.getOrThrow(byName.get("sql.execute")!.parent)).toBe(byName.get("IntegrationKeys.authorize"))
      expect(Option.getOrThrow(byName.get("IntegrationKeys.authorize")!.parent)).toBe(byName.get("http.server GET"))
      expect(after).toBe(byName.get("http.server GET"))
    }))

  it.effect("ends the span with a failure's exit and restores the parent", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      const after = yield* Effect.fail("refused").pipe(
        Spans.hot("IntegrationKeyAuth"),
        Effect.flip,
        Effect.zipRight(Effect.currentSpan),
        Effect.withSpan("root", { captureStackTrace: false }),
        Effect.withTracer(tracer)
      )
      const child = made.find((span) => span.name === "IntegrationKeyAuth")!
      expect(shape(child)).toMatchObject({ ended: true, exit: false })
      expect(after.name).toBe("root")
    }))

  it.effect("ends the span when the effect is interrupted", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      const fiber = yield* Effect.never.pipe(Spans.hot("IntegrationKeyAuth"), Effect.withTracer(tracer), Effect.fork)
      yield* Effect.yieldNow().pipe(Effect.repeat({ until: () => made.length > 0 }))
      yield* Fiber.interrupt(fiber)
      const child = made[0]!
      expect(child.status._tag).toBe("Ended")
      expect(child.status._tag === "Ended" && Exit.isInterrupted(child.status.exit)).toBe(true)
    }))

  it.effect("makes no span in a trace that is not recorded, nor with tracing off: the effect sees the parent", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      const current = Effect.option(Effect.currentParentSpan).pipe(Spans.hot("IntegrationKeyAuth"))
      const inUnsampled = yield* current.pipe(Effect.withParentSpan(unsampled), Effect.withTracer(tracer))
      expect(Option.getOrThrow(inUnsampled)).toBe(unsampled)
      yield* current.pipe(Effect.withSpan("root"), Effect.withTracerEnabled(false), Effect.withTracer(tracer))
      expect(made).toEqual([])
    }))

  it.effect("times the span with the Clock, and not at all with timing off", () =>
    Effect.gen(function*() {
      const { made, tracer } = yield* recording
      yield* TestClock.adjust("1 second").pipe(Spans.hot("timed"), Effect.withTracer(tracer))
      yield* Effect.void.pipe(Spans.hot("untimed"), Effect.withTracerTiming(false), Effect.withTracer(tracer))
      const [timed, untimed] = made as [Tracer.Span, Tracer.Span]
      expect(timed.status._tag === "Ended" && timed.status.endTime - timed.status.startTime).toBe(1_000_000_000n)
      expect(untimed.status).toMatchObject({ _tag: "Ended", startTime: 0n, endTime: 0n })
    }))
})
