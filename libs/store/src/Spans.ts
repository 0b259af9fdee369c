/**
 * Spans on a per-request hot path. `Effect.withSpan` copies the fiber's refs
 * to make the span and provides it around the effect (a region that sets,
 * then restores, the fiber's context): on GET /perform-list its two key-check
 * spans cost about a sixth of the request's CPU. `hot` makes the same span
 * from the same tracer, with the same parent, timing, annotations and links,
 * and sets it as the parent of the effect's spans, for a few operations.
 *
 * A trace that is not recorded (its parent span is not sampled, or tracing
 * is off) gets no span at all from `hot`: nothing would ever read one, and
 * the effect's own spans and log lines name the parent instead.
 */
import { Chunk, Clock, Context, Effect, FiberRef, HashMap, Option, Tracer } from "effect"

const OPTIONS: Tracer.SpanOptions = { captureStackTrace: false }
const NO_LINKS: ReadonlyArray<Tracer.SpanLink> = []

/**
 * `Effect.withSpan(name, { captureStackTrace: false })` for a hot path: the
 * same span in the same tree (see the module comment), none in a trace that
 * is not recorded.
 */
export const hot = (name: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Tracer.ParentSpan>> =>
  Effect.withFiberRuntime((fiber) => {
    const parent = fiber.currentSpan
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled) || parent?.sampled === false) {
      return self as Effect.Effect<A, E, Exclude<R, Tracer.ParentSpan>>
    }
    // A parent that hides itself from its children: Effect's own rules say which span is the parent.
    if (parent !== undefined && Context.get(parent.context, Tracer.DisablePropagation)) {
      return Effect.withSpan(self, name, OPTIONS)
    }
    const annotations = fiber.getFiberRef(FiberRef.currentTracerSpanAnnotations)
    const links = fiber.getFiberRef(FiberRef.currentTracerSpanLinks)
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const timed = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
    const span = fiber.currentTracer.span(
      name,
      Option.fromNullable(parent),
      Context.empty(),
      Chunk.isEmpty(links) ? NO_LINKS : Chunk.toReadonlyArray(links),
      timed ? clock.unsafeCurrentTimeNanos() : 0n,
      "internal",
      OPTIONS
    )
    if (HashMap.size(annotations) > 0) HashMap.forEach(annotations, (value, key) => span.attribute(key, value))
    const outer = fiber.currentContext
    return Effect.onExit(
      Effect.zipRight(FiberRef.set(FiberRef.currentContext, Context.add(outer, Tracer.ParentSpan, span)), self),
      (exit) =>
        Effect.zipRight(
          FiberRef.set(FiberRef.currentContext, outer),
          Effect.sync(() => {
            if (span.status._tag === "Started") span.end(timed ? clock.unsafeCurrentTimeNanos() : 0n, exit)
          })
        )
    ) as Effect.Effect<A, E, Exclude<R, Tracer.ParentSpan>>
  })
