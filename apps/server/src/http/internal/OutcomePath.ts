/**
 * POST /v1/calls/{callId}/outcome — what the call-handling service posts
 * after every call — answered from the Node request event, without the
 * router, its middleware chain and their per-request context copies: the
 * same admin-token check (`tokenCheck`), body rules (`ErrorResponses`:
 * declared JSON, at most `MAX_BODY_BYTES`), payload Schema, `Outcomes.accept`, answers and Error objects, server span
 * (`http.server POST`, sampled as any other), access line and HTTP metrics.
 *
 * It takes only the plain case, decided from the head before any byte of
 * the body is read: a token that matches, a plain call id, a JSON body of a
 * declared length within the cap, HTTP/1.1 with a Host, nothing unanswered
 * before it on its connection. Anything else goes the router's way, which
 * answers it as before (401, a call id to decode, 400 for the head, ...).
 */
import { HttpServerError, HttpServerResponse } from "@effect/platform"
import { Outcomes } from "@crm-relay/calls"
import { CallOutcome } from "@crm-relay/contract/CallOutcome"
import { Accepted } from "@crm-relay/contract/Calls"
import { OutcomeConflict } from "@crm-relay/contract/InternalApi/CallsApi"
import { Events } from "@crm-relay/contract"
import { ErrorResponses } from "@crm-relay/events"
import { type Cause, Effect, Either, type Fiber, Redacted, Runtime, Schema } from "effect"
import type * as Http from "node:http"
import { performance } from "node:perf_hooks"
import * as AnswerBeforeRouter from "../AnswerBeforeRouter.js"
import type { Shortcut } from "../HttpConnections.js"
import type { RefusalLog } from "../RefusalLog.js"
import { acceptOutcome } from "./CallsApiLive.js"

/** The route template in access lines, metrics and the span (as the router names it). */
export const ROUTE = "/v1/calls/:callId/outcome"

/**
 * The raw request target of the plain case: a call id of characters the router takes as they are
 * (no percent-decoding to do) and that the contract's call id accepts.
 */
const TARGET = /^\/v1\/calls\/([A-Za-z0-9._~:@-]{1,200})\/outcome$/

/** As the platform's bearer security reads the token: whatever follows the scheme's 7 characters. */
const BEARER_LENGTH = "Bearer ".length

// As HttpApiBuilder decodes the payload, and encodes the success and the 409.
const decodeOutcome = Schema.decodeUnknownEither(CallOutcome)
const encodeAccepted = Schema.encodeSync(Accepted)
const encodeConflict = Schema.encodeSync(OutcomeConflict.wire)

/** Whether the body is declared as the plain case has it: a length in digits within the cap, no transfer coding. */
const plainLength = (request: Http.IncomingMessage): boolean => {
  const length = request.headers["content-length"]
  if (length === undefined || request.headers["transfer-encoding"] !== undefined || !/^[0-9]{1,6}$/.test(length)) return false
  const bytes = Number(length)
  return bytes > 0 && bytes <= ErrorResponses.MAX_BODY_BYTES
}

/** The internal port's POST /v1/calls/{callId}/outcome path (see the module comment), for `serveApi`'s shortcut. */
export const shortcut = (options: {
  readonly adminToken: (given: Redacted.Redacted<string>) => boolean
  readonly messages: ErrorResponses.Messages
}) =>
(refusals: RefusalLog) =>
  Effect.gen(function*() {
    const outcomes = yield* Outcomes.Outcomes
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())

    /** The answer to a body read in full: refused input at once, else the outcome accepted. */
    const answerOf = (callId: string, text: string): Effect.Effect<HttpServerResponse.HttpServerResponse, Events.NotFound> => {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        return Effect.succeed(ErrorResponses.badRequest(ErrorResponses.NOT_JSON))
      }
      const decoded = decodeOutcome(parsed)
      if (Either.isLeft(decoded)) {
        return Effect.succeed(ErrorResponses.badRequest(ErrorResponses.decodeFailureSentence(decoded.left)))
      }
      return acceptOutcome(outcomes, callId, decoded.right).pipe(
        Effect.map((accepted) => HttpServerResponse.unsafeJson(encodeAccepted(accepted), { status: 202 })),
        // Its status is the API's declaration, which this path has no router to read: encoded here.
        Effect.catchTag("OutcomeConflict", (conflict) => Effect.succeed(HttpServerResponse.unsafeJson(encodeConflict(conflict), { status: 409 })))
      )
    }

    const answerCause = (cause: Cause.Cause<Events.NotFound>) => ErrorResponses.answerCause(cause, options.messages)

    return ((request, response, queued) => {
      if (queued || request.method !== "POST") return false
      const target = TARGET.exec(request.url ?? "")
      if (target === null || request.httpVersion !== "1.1" || request.headers.host === undefined) return false
      if (!ErrorResponses.isJson(request) || !plainLength(request)) return false
      if (!options.adminToken(Redacted.make((request.headers.authorization ?? "").slice(BEARER_LENGTH)))) return false
      const started = performance.now()
      const address = request.socket.remoteAddress
      const callId = target[1]!
      const chunks: Array<Buffer> = []
      let fiber: Fiber.RuntimeFiber<void> | undefined
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.once("end", () => {
        const taken = { request, response, api: "internal", actor: "admin_token", method: "POST", route: ROUTE, address, started }
        fiber = runFork(AnswerBeforeRouter.answer(taken, refusals, answerOf(callId, Buffer.concat(chunks).toString("utf8")), answerCause))
      })
      // A client gone before its answer: the work stops, as on the router's path.
      response.on("close", () => {
        if (!response.writableEnded && fiber !== undefined) fiber.unsafeInterruptAsFork(HttpServerError.clientAbortFiberId)
      })
      return true
    }) satisfies Shortcut
  })
