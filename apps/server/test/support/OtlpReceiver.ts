/**
 * A local OpenTelemetry collector stand-in: an HTTP server on loopback that
 * accepts OTLP/HTTP JSON trace exports (`POST /v1/traces`) and keeps the spans.
 */
import { Effect, type Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One received span, ids as hex. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly name: string
  readonly serviceName: string
  readonly attributes: Readonly<Record<string, unknown>>
}

/** The receiver: its base URL (OTEL_EXPORTER_OTLP_ENDPOINT) and what it got. */
export interface OtlpReceiver {
  readonly endpoint: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** Requests that were not a JSON trace export. */
  readonly rejected: () => number
}

interface KeyValue {
  readonly key: string
  readonly value: Record<string, unknown>
}

const plainValue = (value: Record<string, unknown>): unknown =>
  value["stringValue"] ?? value["intValue"] ?? value["doubleValue"] ?? value["boolValue"]

const attributesOf = (list: ReadonlyArray<KeyValue> | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, plainValue(kv.value)]))

/** Starts a receiver for the scope. */
export const make: Effect.Effect<OtlpReceiver, never, Scope.Scope> = Effect.gen(function*() {
  const spans: Array<ReceivedSpan> = []
  let rejected = 0
  const server = yield* Effect.acquireRelease(
    Effect.async<Http.Server>((resume) => {
      const s = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          if (req.method !== "POST" || req.url !== "/v1/traces" || !String(req.headers["content-type"]).includes("json")) {
            rejected++
            res.writeHead(400).end()
            return
          }
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            resourceSpans?: ReadonlyArray<{
              resource?: { attributes?: ReadonlyArray<KeyValue> }
              scopeSpans?: ReadonlyArray<{ spans?: ReadonlyArray<Record<string, unknown>> }>
            }>
          }
          for (const resourceSpans of body.resourceSpans ?? []) {
            const serviceName = String(attributesOf(resourceSpans.resource?.attributes)["service.name"] ?? "")
            for (const scope of resourceSpans.scopeSpans ?? []) {
              for (const span of scope.spans ?? []) {
                spans.push({
                  traceId: String(span["traceId"]),
                  spanId: String(span["spanId"]),
                  parentSpanId: String(span["parentSpanId"] ?? ""),
                  name: String(span["name"]),
                  serviceName,
                  attributes: attributesOf(span["attributes"] as ReadonlyArray<KeyValue> | undefined)
                })
              }
            }
          }
          res.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) =>
      Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
  )
  const port = (server.address() as AddressInfo).port
  return { endpoint: `http://127.0.0.1:${port}`, spans: () => [...spans], rejected: () => rejected }
})
