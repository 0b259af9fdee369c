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
import { HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { Events } from "@crm-relay/contract"
import { ErrorResponses, EventApiLive } from "@crm-relay/events"
import { type Cause, Effect, Option, Runtime, Schema } from "effect"
import { performance } from "node:perf_hooks"
import * as AnswerBeforeRouter from "../AnswerBeforeRouter.js"
import type { Shortcut } from "../HttpConnections.js"
import type { RefusalLog } from "../RefusalLog.js"
import * as ClientAddress from "./ClientAddress.js"

/** The route template in access lines, metrics and the span (as the router names it). */
export const ROUTE = "/perform-list"

/** The pair's raw request target (as `EventApiLive.serves` has it), its query captured. */
const TARGET = /^\/perform-list(?:\?(.*))?$/s

const decodeParams = Schema.decodeUnknownOption(Events.PerformListParams)

const decodeLimit = (params: unknown): number | undefined => Option.getOrUndefined(Option.map(decodeParams(params), (decoded) => decoded.limit))

/** The limit of a request without a query (most polls), decoded once. */
const bareLimit = decodeLimit({})

/** The `limit` the handler would decode from `query`; none when it would refuse it. */
const limitOf = (query: string | undefined): number | undefined =>
  query === undefined || query === ""
    ? bareLimit
    : decodeLimit(HttpServerRequest.searchParamsFromURL(new URL(`http://localhost/perform-list?${query}`)))

/**
 * The records as `Events.PreviewList` encodes them: themselves. `PreviewRecord` has no transformation
 * (strings and a boolean, its type is its encoded form), and the records were checked when they were
 * read (`Preview.records`, at most the clamped limit): encoding them only ran that check again, 2 %
 * of this path's CPU.
 */
const encoded = (records: ReadonlyArray<Events.PreviewRecord>): typeof Events.PreviewList.Encoded => records

/** The public port's GET /perform-list path (see the module comment), for `serveApi`'s shortcut. */
export const shortcut = (options: { readonly trusted: ReadonlyArray<AddressPolicy.Cidr> }) => (refusals: RefusalLog) =>
  Effect.gen(function*() {
    const performList = yield* EventApiLive.makePerformList
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())

    const answerCause = (cause: Cause.Cause<Events.RateLimited | Events.Unauthorized>) =>
      ErrorResponses.answerCause(cause, EventApiLive.errorPolicy).pipe(
        // Even a defect of the answer itself is the contract's 502.
        Effect.catchAllCause((cause) => Effect.as(Effect.logError("Unexpected failure", cause), ErrorResponses.unreachable))
      )

    return ((request, response, queued) => {
      if (queued || request.method !== "GET") return false
      const target = TARGET.exec(request.url ?? "")
      if (target === null || request.httpVersion !== "1.1" || request.headers.host === undefined || ErrorResponses.hasBody(request)) return false
      const limit = limitOf(target[1])
      if (limit === undefined) return false
      const started = performance.now()
      const header = request.headers["x-forwarded-for"]
      const address = ClientAddress.resolve(
        options.trusted,
        request.socket.remoteAddress,
        Array.isArray(header) ? header.join(", ") : header
      )
      const taken = { request, response, api: "public", actor: "anonymous", method: "GET", route: ROUTE, address, started }
      const fiber = runFork(AnswerBeforeRouter.answer(
        taken,
        refusals,
        // As HttpApiBuilder answers the endpoint's success: its schema's encoding (see `encoded`), as JSON.
        Effect.map(
          performList({ address, authorization: request.headers.authorization, limit }),
          (records) => HttpServerResponse.unsafeJson(encoded(records), { status: 200, contentType: "application/json" })
        ),
        answerCause
      ))
      // A client gone before its answer: the work stops, as on the router's path.
      response.on("close", () => {
        if (!response.writableEnded) fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
      })
      return true
    }) satisfies Shortcut
  })
