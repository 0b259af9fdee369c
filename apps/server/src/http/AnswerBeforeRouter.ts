/**
 * The answer of a request taken before the router by a `Shortcut` (GET
 * /perform-list, POST /v1/calls/{callId}/outcome), given as the router's
 * path gives it: a server span as the platform's tracer makes it (parent from
 * `traceparent`, sampled as any other, `http.route` set, the request and
 * response described when recorded), the handler acting as the API's actor,
 * its failures as the API's answers, the response written, then the access
 * line and the HTTP metrics.
 */
import { Headers, type HttpServerResponse, HttpTraceContext } from "@effect/platform"
import * as Audit from "@crm-relay/store/Audit"
import { type Cause, Context, Effect, type Fiber, FiberRef, Option, type Redacted, Tracer } from "effect"
import type * as Http from "node:http"
import { performance } from "node:perf_hooks"
import * as AccessLog from "./accessLog.js"
import type { RefusalLog } from "./RefusalLog.js"

/** One request a shortcut took: where to answer it, and what its span and access line name. */
export interface Taken {
  readonly request: Http.IncomingMessage
  readonly response: Http.ServerResponse
  /** The API's name in access lines and metrics (`public`, `internal`), and who it acts as until authenticated. */
  readonly api: string
  readonly actor: string
  readonly method: string
  /** The route template, as the router names it. */
  readonly route: string
  readonly address: string | undefined
  /** `performance.now()` when the head was read. */
  readonly started: number
}

/** The attributes the platform's tracer writes on a recorded server span, for this request. */
const describeRequest = (span: Tracer.Span, taken: Taken, redacted: Record<string, string | Redacted.Redacted>) => {
  const headers = Headers.fromInput(taken.request.headers as Headers.Input)
  span.attribute("http.request.method", taken.method)
  const protocol = headers["x-forwarded-proto"] === "https" ? "https" : "http"
  try {
    const url = new URL(taken.request.url ?? taken.route, `${protocol}://${headers.host ?? "localhost"}`)
    span.attribute("url.full", url.toString())
    span.attribute("url.path", url.pathname)
    if (url.search.length > 1) span.attribute("url.query", url.search.slice(1))
    span.attribute("url.scheme", url.protocol.slice(0, -1))
  } catch {
    // A Host that makes no URL: the platform writes no URL attributes either.
  }
  if (headers["user-agent"] !== undefined) span.attribute("user_agent.original", headers["user-agent"])
  for (const [name, value] of Object.entries(redacted)) span.attribute(`http.request.header.${name}`, String(value))
  if (taken.address !== undefined) span.attribute("client.address", taken.address)
}

/** Writes `answer` to `response` (our answers are JSON bodies or none). */
const write = (response: Http.ServerResponse, answer: HttpServerResponse.HttpServerResponse): void => {
  if (response.writableEnded || response.destroyed) return
  response.writeHead(answer.status, answer.headers)
  response.end(answer.body._tag === "Uint8Array" ? answer.body.body : undefined)
}

/**
 * Answers `taken` with what `handle` gives, its failures and defects through `answerCause` (the
 * API's Error objects), in its server span; ends with its access line.
 */
export const answer = <E>(
  taken: Taken,
  refusals: RefusalLog,
  handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E>,
  answerCause: (cause: Cause.Cause<E>) => Effect.Effect<HttpServerResponse.HttpServerResponse>
): Effect.Effect<void> =>
  Effect.withFiberRuntime<void>((fiber) => {
    const acting: Audit.Acting = { actor: taken.actor, accountId: undefined }
    const parent = HttpTraceContext.fromHeaders(taken.request.headers as Headers.Headers)
    return Effect.useSpan(
      `http.server ${taken.method}`,
      { parent: Option.getOrUndefined(parent), kind: "server", captureStackTrace: false },
      (span) => {
        const redactedNames = fiber.getFiberRef(Headers.currentRedactedNames)
        if (span.sampled) {
          describeRequest(span, taken, Headers.redact(Headers.fromInput(taken.request.headers as Headers.Input), redactedNames))
        }
        span.attribute("http.route", taken.route)
        // This fiber serves this request alone and ends with it: its actor and parent span are set, not
        // provided around the rest: a provide and its restore cost about 6 % of the perform-list path's CPU.
        return Audit.actAs(acting).pipe(
          Effect.zipRight(FiberRef.update(FiberRef.currentContext, Context.add(Tracer.ParentSpan, span))),
          Effect.zipRight(handle),
          Effect.catchAllCause(answerCause),
          Effect.flatMap((answer) => {
            write(taken.response, answer)
            span.attribute("http.response.status_code", answer.status)
            if (span.sampled) {
              for (const [name, value] of Object.entries(Headers.redact(answer.headers, redactedNames))) {
                span.attribute(`http.response.header.${name}`, String(value))
              }
            }
            return AccessLog.record(fiber as Fiber.RuntimeFiber<unknown, unknown>, refusals, {
              api: taken.api,
              method: taken.method,
              route: taken.route,
              status: answer.status,
              seconds: (performance.now() - taken.started) / 1000,
              accountId: acting.accountId,
              address: taken.address
            })
          })
        )
      }
    )
  })
