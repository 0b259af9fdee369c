/**
 * GET /perform-list — the pair platforms poll all day — answered from the
 * Node request event, without the router, its middleware chain and their
 * per-request context copies: the same key check, statement and preview
 * (`EventApiLive.makePerformList`, built once here), the same answers and
 * Error objects (`ErrorResponses.answerCause`), the same server span
 * (`http.server GET`, sampled as any other), access line and HTTP metrics.
 *
 * It takes only the plain case; anything else goes the router's way, which
 * answers it as before: a query `PerformListParams` does not decode (its
 * 400 is the router's), a body, HTTP/1.0 or no Host, and a request behind
 * an unanswered one of its connection (the router's path keeps them in order).
 */
import { Headers, HttpServerError, HttpServerRequest, HttpServerResponse, HttpTraceContext } from "@effect/platform"
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { Events } from "@crm-relay/contract"
import { ErrorResponses, EventApiLive } from "@crm-relay/events"
import * as Audit from "@crm-relay/store/Audit"
import { Effect, type Fiber, Option, type Redacted, Runtime, Schema, type Tracer } from "effect"
import type * as Http from "node:http"
import { performance } from "node:perf_hooks"
import * as AccessLog from "../accessLog.js"
import type { Shortcut } from "../HttpConnections.js"
import type { RefusalLog } from "../RefusalLog.js"
import * as ClientAddress from "./ClientAddress.js"

/** The route template in access lines, metrics and the span (as the router names it). */
export const ROUTE = "/perform-list"

/** The pair's raw request target (as `EventApiLive.serves` has it), its query captured. */
const TARGET = /^\/perform-list(?:\?(.*))?$/s

const decodeParams = Schema.decodeUnknownOption(Events.PerformListParams)

/** The `limit` the handler would decode from `query`; none when it would refuse it. */
const limitOf = (query: string | undefined): number | undefined => {
  const params = query === undefined || query === ""
    ? {}
    : HttpServerRequest.searchParamsFromURL(new URL(`http://localhost/perform-list?${query}`))
  return Option.getOrUndefined(Option.map(decodeParams(params), (decoded) => decoded.limit))
}

/** Whether `request` says it carries a body (a length other than 0, or a transfer coding). */
const hasBody = (request: Http.IncomingMessage): boolean => {
  const length = request.headers["content-length"]
  return (length !== undefined && length !== "0") || request.headers["transfer-encoding"] !== undefined
}

/** The attributes the platform's tracer writes on a recorded server span, for this request (also the outcome path's). */
export const describeRequest = (
  span: Tracer.Span,
  request: Http.IncomingMessage,
  address: string | undefined,
  redacted: Record<string, string | Redacted.Redacted>,
  method = "GET"
) => {
  const headers = Headers.fromInput(request.headers as Headers.Input)
  span.attribute("http.request.method", method)
  const protocol = headers["x-forwarded-proto"] === "https" ? "https" : "http"
  try {
    const url = new URL(request.url ?? ROUTE, `${protocol}://${headers.host ?? "localhost"}`)
    span.attribute("url.full", url.toString())
    span.attribute("url.path", url.pathname)
    if (url.search.length > 1) span.attribute("url.query", url.search.slice(1))
    span.attribute("url.scheme", url.protocol.slice(0, -1))
  } catch {
    // A Host that makes no URL: the platform writes no URL attributes either.
  }
  if (headers["user-agent"] !== undefined) span.attribute("user_agent.original", headers["user-agent"])
  for (const [name, value] of Object.entries(redacted)) span.attribute(`http.request.header.${name}`, String(value))
  if (address !== undefined) span.attribute("client.address", address)
}

/** Writes `answer` to `response` (our answers are JSON bodies or none). */
export const write = (response: Http.ServerResponse, answer: HttpServerResponse.HttpServerResponse): void => {
  if (response.writableEnded || response.destroyed) return
  response.writeHead(answer.status, answer.headers)
  response.end(answer.body._tag === "Uint8Array" ? answer.body.body : undefined)
}

/** The public port's GET /perform-list path (see the module comment), for `serveApi`'s shortcut. */
export const shortcut = (options: { readonly trusted: ReadonlyArray<AddressPolicy.Cidr> }) => (refusals: RefusalLog) =>
  Effect.gen(function*() {
    const performList = yield* EventApiLive.makePerformList
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const encode = Schema.encodeSync(Events.PreviewList)

    /** The whole answer of one request, in its server span; ends with its access line. */
    const answer = (
      request: Http.IncomingMessage,
      response: Http.ServerResponse,
      check: EventApiLive.KeyCheck & { readonly limit: number },
      started: number
    ) =>
      Effect.withFiberRuntime<void>((fiber) => {
        const acting: Audit.Acting = { actor: "anonymous", accountId: undefined }
        const parent = HttpTraceContext.fromHeaders(request.headers as Headers.Headers)
        return Effect.useSpan(
          "http.server GET",
          { parent: Option.getOrUndefined(parent), kind: "server", captureStackTrace: false },
          (span) => {
            const redactedNames = fiber.getFiberRef(Headers.currentRedactedNames)
            if (span.sampled) {
              describeRequest(span, request, check.address, Headers.redact(Headers.fromInput(request.headers as Headers.Input), redactedNames))
            }
            span.attribute("http.route", ROUTE)
            return performList(check).pipe(
              // As HttpApiBuilder answers the endpoint's success: its schema's encoding, as JSON.
              Effect.map((records) => HttpServerResponse.unsafeJson(encode(records), { status: 200, contentType: "application/json" })),
              Audit.actingAs(acting),
              Effect.catchAllCause((cause) => ErrorResponses.answerCause(cause, EventApiLive.errorPolicy)),
              // Even a defect of the answer itself is the contract's 502.
              Effect.catchAllCause((cause) => Effect.as(Effect.logError("Unexpected failure", cause), ErrorResponses.unreachable)),
              Effect.flatMap((answer) => {
                write(response, answer)
                span.attribute("http.response.status_code", answer.status)
                if (span.sampled) {
                  for (const [name, value] of Object.entries(Headers.redact(answer.headers, redactedNames))) {
                    span.attribute(`http.response.header.${name}`, String(value))
                  }
                }
                return AccessLog.record(fiber as Fiber.RuntimeFiber<unknown, unknown>, refusals, {
                  api: "public",
                  method: "GET",
                  route: ROUTE,
                  status: answer.status,
                  seconds: (performance.now() - started) / 1000,
                  accountId: acting.accountId,
                  address: check.address
                })
              }),
              Effect.withParentSpan(span)
            )
          }
        )
      })

    return ((request, response, queued) => {
      if (queued || request.method !== "GET") return false
      const target = TARGET.exec(request.url ?? "")
      if (target === null || request.httpVersion !== "1.1" || request.headers.host === undefined || hasBody(request)) return false
      const limit = limitOf(target[1])
      if (limit === undefined) return false
      const started = performance.now()
      const header = request.headers["x-forwarded-for"]
      const address = ClientAddress.resolve(
        options.trusted,
        request.socket.remoteAddress,
        Array.isArray(header) ? header.join(", ") : header
      )
      const fiber = runFork(answer(request, response, { address, authorization: request.headers.authorization, limit }, started))
      // A client gone before its answer: the work stops, as on the router's path.
      response.on("close", () => {
        if (!response.writableEnded) fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
      })
      return true
    }) satisfies Shortcut
  })
