/**
 * Handlers of the in-call group of the internal API (see InCallApi). Every
 * mistake of the voice agent's input is answered in the one shape it acts on
 * mid-call, `{ok: false, reason, message}` with 200: a body of the wrong
 * shape, not JSON or too large is `rejected` (see `refusedInput`, used where
 * the internal API is served), an unknown account `not_configured`.
 */
import { HttpApiBuilder, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { InCall } from "@crm-relay/calls"
import type * as Answers from "@crm-relay/contract/InCall"
import { InternalApi } from "@crm-relay/contract/InternalApi"
import { InCallGroup } from "@crm-relay/contract/InternalApi/InCallApi"
import { Effect, Option } from "effect"

const unknownAccount = (error: { readonly accountId: string }) =>
  Effect.succeed<Answers.Failure>({ ok: false, reason: "not_configured", message: `No account with id ${error.accountId} exists.` })

/** The handlers of the in-call group. */
export const layer = HttpApiBuilder.group(InternalApi, "inCall", (handlers) =>
  Effect.gen(function*() {
    const inCall = yield* InCall.InCall
    return handlers
      .handle("contactsSearch", ({ path, payload }) =>
        inCall.contactsSearch(path.id, path.tenantId, payload).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("contactsUpsert", ({ path, payload }) =>
        inCall.contactsUpsert(path.id, path.tenantId, payload.contact).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("availability", ({ path, payload }) =>
        inCall.availabilityList(path.id, path.tenantId, payload.window).pipe(Effect.catchTag("AccountNotFound", unknownAccount)))
      .handle("appointments", ({ path, payload }) =>
        inCall.appointmentsCreate(path.id, path.tenantId, payload.appointment).pipe(
          Effect.catchTag("AccountNotFound", unknownAccount)
        ))
  }))

// The in-call routes, from the group's own endpoints (`:id` matches one path segment).
const routes = Object.values(InCallGroup.endpoints).map((endpoint) => ({
  method: endpoint.method,
  path: new RegExp(`^${endpoint.path.replace(/:[^/]+/g, "[^/]+")}$`)
}))

/** The in-call answer to refused input (`sentence` says why) for `method` and `url`, an in-call route's; none for any other. */
export const rejection = (method: string, url: string, sentence: string): Option.Option<Answers.Failure> => {
  const path = url.split("?")[0] ?? ""
  return routes.some((route) => route.method === method && route.path.test(path))
    ? Option.some({ ok: false, reason: "rejected", message: sentence })
    : Option.none()
}

/** The in-call answer to refused input (`sentence` says why), for an in-call route; none for any other. */
export const refusedInput = (
  request: HttpServerRequest.HttpServerRequest,
  sentence: string
): Option.Option<HttpServerResponse.HttpServerResponse> =>
  Option.map(rejection(request.method, request.url, sentence), (answer) => HttpServerResponse.unsafeJson(answer))
