/**
 * A request that sends no body at all (no Content-Length or 0, no
 * Transfer-Encoding) and declares no Content-Type is read as the JSON object
 * `{}`: on a route whose body is optional (every field optional) that is the
 * defaults, as the contract says; on one with a required field, the 400
 * names that field. A body that is present but not JSON is still refused.
 */
import { type HttpServerRequest, HttpMethod } from "@effect/platform"
import { Effect } from "effect"

const EMPTY_OBJECT = Effect.succeed("{}")

/** Whether `request` is a POST, PUT or PATCH without a body or a Content-Type. */
export const sendsNothing = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const { headers } = request
  const length = headers["content-length"]
  return HttpMethod.hasBody(request.method) && (length === undefined || length === "0") &&
    headers["transfer-encoding"] === undefined && headers["content-type"] === undefined
}

/** `request`, its body read as `{}` when it sends nothing (the platform's `json` reads `this.text`). */
export const orEmptyObject = (request: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest =>
  sendsNothing(request) ? Object.create(request, { text: { value: EMPTY_OBJECT } }) as HttpServerRequest.HttpServerRequest : request
