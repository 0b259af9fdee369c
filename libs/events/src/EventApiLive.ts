/**
 * The public Event API implemented on the contract's `EventApi`: the
 * integration-key middleware (401, 429 with the per-key limit) and the three
 * endpoints. Compose with `ErrorResponses.layer` and `HttpApiBuilder.serve`.
 */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { EventApi, Events } from "@crm-relay/contract"
import * as Audit from "@crm-relay/store/Audit"
import { Effect, Layer, Metric, Option, Redacted } from "effect"
import * as ErrorResponses from "./ErrorResponses.js"
import { IntegrationKeys } from "./IntegrationKeys.js"
import { Preview } from "./Preview.js"
import { RateLimiter, refusals } from "./RateLimiter.js"
import { Subscriptions } from "./Subscriptions.js"

/** Sentences of the Event API's errors. */
export const messages = {
  unauthorized: "The integration key is missing, invalid or disabled.",
  rateLimited: "Rate limit exceeded: 60 requests per key per minute.",
  notFound: "Not found: the Event API serves POST /subscribe, DELETE /subscribe/{id} and GET /perform-list.",
  unknownSubscription: "No subscription with this id exists for this account.",
  contentType: "Content-Type must be application/json."
} as const

/** The rate-limit subject of an integration key. */
export const rateLimitSubject = (keyId: string): string => `integration-key:${keyId}`

const BEARER = /^Bearer +(\S+) *$/i

/** The bearer token of an Authorization header (scheme case-insensitive), or "". */
export const bearerToken = (authorization: string | undefined): Redacted.Redacted<string> =>
  Redacted.make(BEARER.exec(authorization ?? "")?.[1] ?? "")

/** Integration-key authentication, then the per-key rate limit. */
export const IntegrationKeyAuthLive: Layer.Layer<EventApi.IntegrationKeyAuth, never, IntegrationKeys | RateLimiter> =
  Layer.effect(
    EventApi.IntegrationKeyAuth,
    Effect.gen(function*() {
      const keys = yield* IntegrationKeys
      const limiter = yield* RateLimiter
      return EventApi.IntegrationKeyAuth.of({
        integrationKey: () =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            const key = yield* keys.authenticate(bearerToken(request.headers["authorization"]))
            if (Option.isNone(key)) return yield* new Events.Unauthorized({ error: messages.unauthorized })
            yield* Audit.identify(`integration_key:${key.value.keyId}`, key.value.accountId)
            const decision = yield* limiter.hit(rateLimitSubject(key.value.keyId))
            if (!decision.allowed) {
              yield* Metric.increment(refusals)
              return yield* new Events.RateLimited({
                error: messages.rateLimited,
                retryAfterSeconds: decision.retryAfterSeconds
              })
            }
            return { accountId: key.value.accountId, keyId: key.value.keyId }
          }).pipe(Effect.withSpan("IntegrationKeyAuth"))
      })
    })
  )

/** The three endpoints. */
export const EventsGroupLive = HttpApiBuilder.group(EventApi.EventApi, "events", (handlers) =>
  Effect.gen(function*() {
    const subscriptions = yield* Subscriptions
    const preview = yield* Preview
    return handlers
      .handle("subscribe", ({ payload, request }) =>
        Effect.gen(function*() {
          // The framework also reads form and text bodies; the contract accepts JSON only.
          if (!ErrorResponses.isJson(request)) return yield* new Events.BadRequest({ error: messages.contentType })
          const { accountId, keyId } = yield* EventApi.CurrentAccount
          const id = yield* subscriptions.create({ accountId, keyId, targetUrl: payload.targetUrl, event: payload.event })
          return { id }
        }))
      .handle("unsubscribe", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* EventApi.CurrentAccount
          const removed = yield* subscriptions.remove(accountId, path.id)
          if (!removed) return yield* new Events.NotFound({ error: messages.unknownSubscription })
        }))
      .handle("performList", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* EventApi.CurrentAccount
          return yield* preview.list(accountId, urlParams.limit)
        }))
  }))

/** The Event API with its handlers and middleware; needs the four services. */
export const layer = HttpApiBuilder.api(EventApi.EventApi).pipe(
  Layer.provide(EventsGroupLive),
  Layer.provide(IntegrationKeyAuthLive)
)
