import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Tracer } from "effect"
import * as TraceSampling from "../src/observability/TraceSampling.js"

/** The current span inside a `name` span, and the one inside a child of it. */
const rootAndChild = Effect.gen(function*() {
  const child = yield* Effect.withSpan(Effect.currentSpan, "child")
  const root = yield* Effect.currentSpan
  return { root, child }
}).pipe(Effect.withSpan("root"))

describe("TraceSampling", () => {
  it.effect("ratio 0: spans are light stand-ins that keep ids (for log lines) and never reach the tracer", () =>
    Effect.gen(function*() {
      const recorded: Array<string> = []
      const { child, root } = yield* rootAndChild.pipe(Effect.provide(TraceSampling.layer(0).pipe(Layer.provide(recording(recorded)))))
      expect(recorded).toEqual([])
      expect(root.sampled).toBe(false)
      expect(child.sampled).toBe(false)
      expect(child.traceId).toBe(root.traceId)
      expect(root.traceId).toMatch(/^[0-9a-f]{32}$/)
      expect(child.spanId).toMatch(/^[0-9a-f]{16}$/)
      expect(child.spanId).not.toBe(root.spanId)
      expect(Option.map(child.parent, (p) => p.spanId)).toEqual(Option.some(root.spanId))
    }))

  it.effect("a recorded root records its children; a caller's traceparent decides for its own trace", () =>
    Effect.gen(function*() {
      const recorded: Array<string> = []
      const tracing = TraceSampling.layer(0.5).pipe(Layer.provide(recording(recorded)))
      const sampledParent = Tracer.externalSpan({ traceId: "a".repeat(32), spanId: "b".repeat(16), sampled: true })
      const unsampledParent = Tracer.externalSpan({ traceId: "c".repeat(32), spanId: "d".repeat(16), sampled: false })
      const followed = yield* rootAndChild.pipe(Effect.withParentSpan(sampledParent), Effect.provide(tracing))
      expect(followed.root.sampled && followed.child.sampled).toBe(true)
      expect(recorded).toEqual(["root", "child"])
      const refused = yield* rootAndChild.pipe(Effect.withParentSpan(unsampledParent), Effect.provide(tracing))
      expect(refused.root.sampled || refused.child.sampled).toBe(false)
      expect(refused.child.traceId).toBe("c".repeat(32))
      expect(recorded).toEqual(["root", "child"])
    }))

  it.effect("a stand-in keeps the attributes read back: the access log reads the router's http.route from an unrecorded server span; others are dropped", () =>
    Effect.gen(function*() {
      const recorded: Array<string> = []
      const span = yield* Effect.gen(function*() {
        yield* Effect.annotateCurrentSpan("http.route", "/perform-list")
        yield* Effect.annotateCurrentSpan("db.query.text", "SELECT 1")
        return yield* Effect.currentSpan
      }).pipe(Effect.withSpan("http.server GET"), Effect.provide(TraceSampling.layer(0).pipe(Layer.provide(recording(recorded)))))
      expect(span.sampled).toBe(false)
      expect(recorded).toEqual([])
      expect(span.attributes.get("http.route")).toBe("/perform-list")
      expect(span.attributes.has("db.query.text")).toBe(false)
    }))

  it("records no new trace when no endpoint exports them, whatever OTEL_TRACES_SAMPLER_ARG says", () => {
    expect(TraceSampling.recordedShare({ otlpEndpoint: Option.none(), sampleRatio: 0.1 })).toBe(0)
    expect(TraceSampling.recordedShare({ otlpEndpoint: Option.none(), sampleRatio: 1 })).toBe(0)
    expect(TraceSampling.recordedShare({ otlpEndpoint: Option.some("http://127.0.0.1:4318"), sampleRatio: 0.1 })).toBe(0.1)
  })

  it.effect("ratio 1 leaves the tracer as it is", () =>
    Effect.gen(function*() {
      const recorded: Array<string> = []
      yield* rootAndChild.pipe(Effect.provide(TraceSampling.layer(1).pipe(Layer.provide(recording(recorded)))))
      expect(recorded).toEqual(["root", "child"])
    }))
})

/** A tracer that notes the name of every span handed to it. */
const recording = (names: Array<string>): Layer.Layer<never> =>
  Layer.setTracer(Tracer.make({
    span: (name, parent, context, links, startTime, kind): Tracer.Span => {
      names.push(name)
      return {
        _tag: "Span",
        name,
        parent,
        context,
        links,
        kind,
        sampled: true,
        spanId: String(names.length).padStart(16, "0"),
        traceId: parent._tag === "Some" ? parent.value.traceId : "e".repeat(32),
        status: { _tag: "Started", startTime },
        attributes: new Map(),
        end: () => {},
        attribute: () => {},
        event: () => {},
        addLinks: () => {}
      }
    },
    context: (f) => f()
  }))
