/**
 * The public Event API implemented on the contract's `EventApi`: the
 * integration-key middleware (401, 429 with the per-key limit) and the three
 * endpoints. Compose with `ErrorResponses.layer` and `HttpApiBuilder.serve`.
 */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { EventApi, Events } from "@crm-relay/contract"
import * as Audit from "@crm-relay/store/Audit"
import * as Spans from "@crm-relay/store/Spans"
import { Context, Effect, Layer, Metric, Option, Redacted, Schema } from "effect"
import type * as Accounts from "./Accounts.js"
import * as ErrorResponses from "./ErrorResponses.js"
import * as FailedKeys from "./FailedKeys.js"
import { IntegrationKeys, type IntegrationKeyId } from "./IntegrationKeys.js"
import { Preview } from "./Preview.js"
import { refusals } from "./RateLimiter.js"
import { limitSentence, Subscriptions } from "./Subscriptions.js"

/**
 * The longest `event` value stored: it is part of an index, whose entries PostgreSQL bounds
 * (about 2.7 kB); a longer value is the client's error, not an unreachable database.
 */
export const MAX_EVENT_BYTES = 1024

// NUL cannot be stored in a PostgreSQL text value; an unpaired surrogate has no UTF-8 form.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** Sentences of the Event API's errors. */
export const messages = {
  unauthorized: "The integration key is missing, invalid or disabled.",
  rateLimited: "Rate limit exceeded: 60 requests per key per minute.",
  failedKeys: (limit: number) =>
    `Rate limit exceeded: more than ${limit} requests with an invalid key from this address in a minute; wait Retry-After seconds.`,
  notFound: "Not found: the Event API serves POST /subscribe, DELETE /subscribe/{id} and GET /perform-list.",
  unknownSubscription: "No subscription with this id exists for this account.",
  contentType: "Content-Type must be application/json.",
  unstorable: (field: string) => `${field} must not contain a NUL character or an unpaired surrogate.`,
  eventTooLong: `event must be at most ${MAX_EVENT_BYTES} bytes.`
} as const

/** The pairs of the contract, on the raw request target: exact method and case, no extra slash, no `;` parameters. */
const SUBSCRIBE = /^\/subscribe(?:\?.*)?$/s
const UNSUBSCRIBE = /^\/subscribe\/[^/;?#]+(?:\?.*)?$/s
const PERFORM_LIST = /^\/perform-list(?:\?.*)?$/s

/** Whether `method` and the raw request target `url` are one of the three pairs (everything else is 404). */
export const serves = (method: string, url: string): boolean =>
  method === "POST" ? SUBSCRIBE.test(url) : method === "DELETE" ? UNSUBSCRIBE.test(url) : method === "GET" && PERFORM_LIST.test(url)

/** How the public port answers errors: the contract's pairs only, and the contract's statuses only. */
export const errorPolicy: ErrorResponses.Messages = { notFound: messages.notFound, serves, strict: true }

/** The 400 sentence for a subscribe payload the database cannot store as given, if any. */
export const unstorable = (payload: { readonly targetUrl: string; readonly event?: string | undefined }): string | undefined => {
  if (UNSTORABLE.test(payload.targetUrl)) return messages.unstorable("targetUrl")
  if (payload.event === undefined) return undefined
  if (UNSTORABLE.test(payload.event)) return messages.unstorable("event")
  return Buffer.byteLength(payload.event, "utf8") > MAX_EVENT_BYTES ? messages.eventTooLong : undefined
}

const BEARER = /^Bearer +(\S+) *$/i

/** The bearer token of an Authorization header (scheme case-insensitive), or "". */
export const bearerToken = (authorization: string | undefined): Redacted.Redacted<string> =>
  Redacted.make(BEARER.exec(authorization ?? "")?.[1] ?? "")

/**
 * The preview a GET /perform-list read in its authorizing statement, for its handler: by request
 * (the middleware and the handler see the same request object), with the limit it was read for.
 */
const prefetched = new WeakMap<HttpServerRequest.HttpServerRequest, { readonly limit: number; readonly read: unknown }>()

/** The `limit` of a GET /perform-list, as its handler will decode it; none when it will refuse it (400). */
const decodeLimit = Schema.decodeUnknownOption(Events.PerformListParams)
const performListLimit = (context: Context.Context<never>): number | undefined => {
  const params = Context.getOption(context, HttpServerRequest.ParsedSearchParams)
  if (Option.isNone(params)) return undefined
  const decoded = decodeLimit(params.value)
  return Option.isSome(decoded) ? decoded.value.limit : undefined
}

/** What the integration-key check reads of a request. */
export interface KeyCheck {
  /** The client address (see the server's ClientAddress); none when unknown. */
  readonly address: string | undefined
  readonly authorization: string | undefined
  /** A GET /perform-list's `limit`: its preview is read by the authorizing statement. None for other pairs. */
  readonly limit: number | undefined
}

/** A request the check let through: its key and account, and the preview read with it (`Preview.latest`), if asked for. */
export interface Admitted {
  readonly accountId: Accounts.AccountId
  readonly keyId: IntegrationKeyId
  readonly preview: unknown
}

/**
 * The check of every Event API request: what the key is without the database
 * (KeyTags: a tagged key whose tag matches, a legacy key, or one never issued),
 * the failed-key limit of the client address for keys that are not valid
 * (before any query: a refused address costs a map lookup; a tagged key passes
 * it, so a valid key is never refused for its address), integration-key
 * authentication, then the per-key rate limit. Built once; the middleware and
 * the server's own GET /perform-list path run this same check.
 */
export const makeKeyCheck = Effect.gen(function*() {
  const keys = yield* IntegrationKeys
  const preview = yield* Preview
  const failedKeys = yield* FailedKeys.FailedKeys
  const tagger = yield* keys.tagger
  const tooManyFailures = messages.failedKeys(failedKeys.policy.limit)
  const refuseAddress = (retryAfterSeconds: number) =>
    Effect.zipRight(Metric.increment(FailedKeys.refusals), new Events.RateLimited({ error: tooManyFailures, retryAfterSeconds }))
  const unauthorized = () => new Events.Unauthorized({ error: messages.unauthorized })
  // A failed key: 401, or 429 once its address is over the limit. Keys told invalid without the
  // database are counted by this replica alone; a legacy key's failure by the shared count.
  const failed = Effect.fnUntraced(function*(address: string | undefined, shared: boolean) {
    if (address === undefined) return yield* unauthorized()
    const refused = yield* failedKeys.refused(address)
    if (Option.isSome(refused)) return yield* refuseAddress(refused.value)
    const failures = yield* (shared ? failedKeys.fail(address) : failedKeys.failHere(address))
    if (!failures.allowed) return yield* refuseAddress(failures.retryAfterSeconds)
    return yield* unauthorized()
  })
  return Effect.fnUntraced(function*(check: KeyCheck) {
    const address = check.address
    const token = bearerToken(check.authorization)
    const secret = Redacted.value(token)
    const shape = tagger.shape(secret)
    const tagged = shape === "tagged" && !failedKeys.revoked.has(secret)
    // Forged, malformed or known revoked: no query.
    if (!tagged && shape !== "legacy") return yield* failed(address, false)
    // A key of the old form passes a refused address only once this replica saw it valid.
    if (!tagged && address !== undefined) {
      const refused = yield* failedKeys.refused(address)
      if (Option.isSome(refused) && !failedKeys.validLegacy.has(secret)) return yield* refuseAddress(refused.value)
    }
    // One statement finds the key and counts the request (IntegrationKeys.authorize); for
    // GET /perform-list (the only GET pair) it also reads the preview: one round trip in all.
    const limit = check.limit
    const authorized = yield* keys.authorize(
      token,
      limit === undefined ? undefined : (accountId) => preview.latest(accountId, limit),
      shape
    )
    if (Option.isNone(authorized)) {
      if (!tagged) {
        failedKeys.validLegacy.delete(secret)
        return yield* failed(address, true)
      }
      // Its tag matched, so it was issued: it is revoked, and its retries will cost no query.
      failedKeys.revoked.add(secret)
      return yield* failed(address, false)
    }
    const { decision, key } = authorized.value
    if (!tagged) failedKeys.validLegacy.add(secret)
    yield* Audit.identify(`integration_key:${key.keyId}`, key.accountId)
    if (!decision.allowed) {
      yield* Metric.increment(refusals)
      return yield* new Events.RateLimited({
        error: messages.rateLimited,
        retryAfterSeconds: decision.retryAfterSeconds
      })
    }
    return { accountId: key.accountId, keyId: key.keyId, preview: authorized.value.alongside } satisfies Admitted
  })
})

/** The span of the key check, on every Event API request (a hot path's span: see Spans). */
const keyCheckSpan = Spans.hot("IntegrationKeyAuth")

/** See `makeKeyCheck`. */
export const IntegrationKeyAuthLive: Layer.Layer<EventApi.IntegrationKeyAuth, never, IntegrationKeys | Preview | FailedKeys.FailedKeys> =
  Layer.effect(
    EventApi.IntegrationKeyAuth,
    Effect.gen(function*() {
      const keyCheck = yield* makeKeyCheck
      return EventApi.IntegrationKeyAuth.of({
        integrationKey: () =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            const limit = request.method === "GET" ? performListLimit(yield* Effect.context<never>()) : undefined
            const admitted = yield* keyCheck({
              address: Option.getOrUndefined(request.remoteAddress),
              authorization: request.headers["authorization"],
              limit
            })
            if (limit !== undefined) prefetched.set(request, { limit, read: admitted.preview })
            // Only after the key: nothing but a JSON body is ever read or parsed.
            if (request.method === "POST") yield* ErrorResponses.guardJsonBody(request)
            return { accountId: admitted.accountId, keyId: admitted.keyId }
          }).pipe(keyCheckSpan)
      })
    })
  )

/**
 * GET /perform-list as one effect, built once: the middleware's key check (in its span), then
 * the handler's answer, for a server that serves this pair without the router. `limit` is decoded
 * as the handler decodes it (`Events.PerformListParams`).
 */
export const makePerformList = Effect.gen(function*() {
  const keyCheck = yield* makeKeyCheck
  const preview = yield* Preview
  return (check: KeyCheck & { readonly limit: number }): Effect.Effect<ReadonlyArray<Events.PreviewRecord>, Events.RateLimited | Events.Unauthorized> =>
    Effect.flatMap(keyCheckSpan(keyCheck(check)), (admitted) =>
      admitted.preview !== undefined ? preview.records(admitted.preview) : preview.list(admitted.accountId, check.limit))
})

/** The three endpoints. */
export const EventsGroupLive = HttpApiBuilder.group(EventApi.EventApi, "events", (handlers) =>
  Effect.gen(function*() {
    const subscriptions = yield* Subscriptions
    const preview = yield* Preview
    return handlers
      .handle("subscribe", ({ payload }) =>
        Effect.gen(function*() {
          const refused = unstorable(payload)
          if (refused !== undefined) return yield* new Events.BadRequest({ error: refused })
          const { accountId, keyId } = yield* EventApi.CurrentAccount
          // At the account's bound: the contract's 400, with the limit and how to make room.
          const id = yield* subscriptions.create({ accountId, keyId, targetUrl: payload.targetUrl, event: payload.event }).pipe(
            Effect.catchTag("TooManySubscriptions", (refused) => new Events.BadRequest({ error: limitSentence(refused) }))
          )
          return { id }
        }))
      .handle("unsubscribe", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* EventApi.CurrentAccount
          const removed = yield* subscriptions.remove(accountId, path.id)
          if (!removed) return yield* new Events.NotFound({ error: messages.unknownSubscription })
        }))
      .handle("performList", ({ request, urlParams }) =>
        Effect.gen(function*() {
          const read = prefetched.get(request)
          if (read !== undefined && read.read !== undefined && read.limit === urlParams.limit) return yield* preview.records(read.read)
          const { accountId } = yield* EventApi.CurrentAccount
          return yield* preview.list(accountId, urlParams.limit)
        }))
  }))

/** The Event API with its handlers and middleware; needs the four services. */
export const layer = HttpApiBuilder.api(EventApi.EventApi).pipe(
  Layer.provide(EventsGroupLive),
  Layer.provide(IntegrationKeyAuthLive)
)
