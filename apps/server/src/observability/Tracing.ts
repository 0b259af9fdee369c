/**
 * Trace export: when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, Effect's spans
 * (every `Effect.fn`, the HTTP server spans, the job runs) go to an
 * OpenTelemetry collector over OTLP/HTTP (JSON). Which traces are recorded is
 * decided in front of this tracer (TraceSampling, at `OTEL_TRACES_SAMPLER_ARG`),
 * so it records every span it is given. Nothing of OpenTelemetry is loaded otherwise:
 * the SDK is imported only when an endpoint is configured. The collector is
 * the operator's own endpoint, so the exporter talks to it directly, not
 * through the egress policy that guards customer-controlled addresses.
 */
import { Effect, Layer, Option } from "effect"
import type * as Settings from "../config/Settings.js"

/** Where and how traces are exported. */
export interface Options {
  /** Base URL of the collector's OTLP/HTTP endpoint; spans are POSTed to `<endpoint>/v1/traces`. */
  readonly endpoint: string
  readonly serviceName: string
  /** Longest wait before a batch of spans is sent. Default 1 s. */
  readonly exportDelayMillis?: number
}

/** The OTLP/HTTP traces URL of a base endpoint (as OTEL_EXPORTER_OTLP_ENDPOINT means it). */
export const tracesUrl = (endpoint: string): string => `${endpoint.replace(/\/+$/, "")}/v1/traces`

/** Exports the spans of the fibers built after this layer to `options.endpoint`; flushes when released. */
export const layer = (options: Options): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.promise(async () => {
      const [OtelTracer, Resource, TraceBase, Exporter] = await Promise.all([
        import("@effect/opentelemetry/Tracer"),
        import("@effect/opentelemetry/Resource"),
        import("@opentelemetry/sdk-trace-base"),
        import("@opentelemetry/exporter-trace-otlp-http")
      ])
      const provider = Layer.scoped(
        OtelTracer.OtelTracerProvider,
        Effect.flatMap(Resource.Resource, (resource) =>
          Effect.acquireRelease(
            Effect.sync(() =>
              new TraceBase.BasicTracerProvider({
                resource,
                sampler: new TraceBase.ParentBasedSampler({ root: new TraceBase.AlwaysOnSampler() }),
                spanProcessors: [
                  new TraceBase.BatchSpanProcessor(
                    new Exporter.OTLPTraceExporter({ url: tracesUrl(options.endpoint) }),
                    { scheduledDelayMillis: options.exportDelayMillis ?? 1000 }
                  )
                ]
              })
            ),
            (provider) =>
              Effect.promise(() => provider.forceFlush().then(() => provider.shutdown())).pipe(
                Effect.timeoutOption("3 seconds"),
                Effect.ignore
              )
          ))
      )
      return Layer.discard(OtelTracer.layer).pipe(
        Layer.provide(provider),
        Layer.provide(Resource.layer({ serviceName: options.serviceName }))
      )
    })
  )

/** Trace export as the settings say: none when no endpoint is configured. */
export const fromSettings = (settings: Settings.TracingSettings): Layer.Layer<never> =>
  Option.match(settings.otlpEndpoint, {
    onNone: () => Layer.empty,
    onSome: (endpoint) => layer({ endpoint, serviceName: settings.serviceName })
  })
