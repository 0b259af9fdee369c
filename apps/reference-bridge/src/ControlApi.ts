/**
 * The optional HTTP control endpoint, for tests that drive a bridge running
 * in another process (e.g. the demo). Bearer-protected by a control token.
 *
 *   POST   {control}/faults          body: a FaultRule or an array of them → 204
 *   GET    {control}/faults          pending rules and their remaining uses
 *   DELETE {control}/faults          clear → 204
 *   GET    {control}/received        the received-request log
 *   GET    {control}/records         stored contacts, leads, appointments, idempotency keys
 *   GET    {control}/grants          OAuth grants
 *   POST   {control}/revoke-tokens   → 204
 *   POST   {control}/reset           → 204
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option, Redacted, Schema } from "effect"
import type { BridgeControl } from "./BridgeControl.js"
import { Fault, FaultRule } from "./Faults.js"
import { bearerCredential } from "./internal/bearer.js"
import { constantTimeEquals } from "./internal/secret.js"

const decodeRules = Schema.decodeUnknown(Schema.Union(FaultRule, Schema.Array(FaultRule)))
const encodeRule = Schema.encodeSync(FaultRule)
const encodeFault = Schema.encodeSync(Fault)

const noContent = HttpServerResponse.empty({ status: 204 })

/** The control endpoint under `basePath`, for `control`, accepting `token`. */
export const make = (basePath: string, token: Redacted.Redacted, control: BridgeControl) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const presented = bearerCredential(request.headers["authorization"])
    if (Option.isNone(presented) || !constantTimeEquals(Redacted.value(presented.value), Redacted.value(token))) {
      return HttpServerResponse.unsafeJson({ error: "Unauthorized." }, {
        status: 401,
        headers: { "www-authenticate": "Bearer realm=\"reference-bridge-control\"" }
      })
    }
    const path = new URL(request.url, "http://control.invalid").pathname.slice(basePath.length)
    const route = `${request.method} ${path}`
    switch (route) {
      case "POST /faults": {
        const body = yield* Effect.orElseSucceed(request.json, () => undefined)
        const rules = yield* Effect.either(decodeRules(body))
        if (rules._tag === "Left") {
          return HttpServerResponse.unsafeJson({ error: `Invalid fault rule: ${rules.left.message}` }, { status: 400 })
        }
        yield* control.setFaults(Array.isArray(rules.right) ? rules.right : [rules.right])
        return noContent
      }
      case "GET /faults":
        return HttpServerResponse.unsafeJson(
          (yield* control.pendingFaults).map((p) => ({ rule: encodeRule(p.rule), remaining: p.remaining }))
        )
      case "DELETE /faults":
        return yield* Effect.as(control.clearFaults, noContent)
      case "GET /received":
        return HttpServerResponse.unsafeJson(
          (yield* control.received).map((r) => ({ ...r, fault: r.fault === undefined ? undefined : encodeFault(r.fault) }))
        )
      case "GET /records":
        return HttpServerResponse.unsafeJson(yield* control.records)
      case "GET /grants":
        return HttpServerResponse.unsafeJson(yield* control.grants)
      case "POST /revoke-tokens":
        return yield* Effect.as(control.revokeTokens, noContent)
      case "POST /reset":
        return yield* Effect.as(control.reset, noContent)
      default:
        return HttpServerResponse.unsafeJson({ error: "Not found." }, { status: 404 })
    }
  })
