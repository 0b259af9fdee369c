/**
 * The Integrations area's API handlers (see `PortalApi` in the contract):
 * every one acts on the session's own account only — an id of another
 * account's key, hook, delivery or push is answered 404, as an unknown one.
 * Changes go through the same services as the Event API, the internal API
 * and the CLI, so each writes its audit line, here naming the session.
 */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import type { Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import { Connections } from "@crm-relay/calls"
import { Events, PortalApi } from "@crm-relay/contract"
import {
  Accounts,
  Deliveries,
  Fanout,
  IntegrationKeys,
  RateLimiter,
  Recoveries,
  SigningSecrets,
  SubscriptionLifecycle,
  Subscriptions
} from "@crm-relay/events"
import * as Audit from "@crm-relay/store/Audit"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { toSettings } from "../internal/ConnectionsApiLive.js"
import { notFound, recoverRefusals, recoveryView, stateOf } from "../internal/SubscriptionLifecycleApiLive.js"
import * as StoredConnectionCheck from "../../workers/StoredConnectionCheck.js"
import { ActivityLive } from "./ActivityLive.js"
import { DestinationsLive } from "./DestinationsLive.js"
import { messages } from "./PortalMessages.js"
import { IDLE_TIMEOUT, PortalSessions, csrfMatches, csrfToken } from "./PortalSessions.js"

const { CurrentSession, PortalAuth } = PortalApi

/** Sentences of this API's errors. */
export { messages }

/** Requests one session may make per minute (the page polls for live updates). */
export const rateLimitPolicy: RateLimiter.RateLimitPolicy = { limit: 600, window: Duration.minutes(1) }

const iso = (date: Date) => date.toISOString()
const isoOrNull = (date: Date | null) => (date === null ? null : iso(date))

/** Cookie + CSRF + rate limit; names the session as the actor of everything the request changes. */
export const PortalAuthLive = Layer.effect(
  PortalAuth,
  Effect.gen(function*() {
    const sessions = yield* PortalSessions
    const limiter = yield* RateLimiter.RateLimiter
    return PortalAuth.of({
      session: (token) =>
        Effect.gen(function*() {
          const found = yield* sessions.authenticate(token)
          if (Option.isNone(found)) return yield* new Events.Unauthorized({ error: messages.noSession })
          const session = found.value
          yield* Audit.identify(`portal_session:${session.sessionId}`, session.accountId)
          const request = yield* HttpServerRequest.HttpServerRequest
          if (request.method !== "GET" && request.method !== "HEAD") {
            if (!csrfMatches(token, request.headers[PortalApi.CSRF_HEADER])) {
              return yield* new PortalApi.CsrfRefused({ error: messages.csrf })
            }
          }
          const decision = yield* limiter.hit(`portal-session:${session.sessionId}`)
          if (!decision.allowed) {
            return yield* new Events.RateLimited({ error: messages.rateLimited, retryAfterSeconds: decision.retryAfterSeconds })
          }
          return { sessionId: session.sessionId, accountId: session.accountId }
        })
    })
  })
)

const SessionLive = HttpApiBuilder.group(PortalApi.PortalApi, "session", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const sessions = yield* PortalSessions
    return handlers
      .handle("get", () =>
        Effect.gen(function*() {
          const current = yield* CurrentSession
          const request = yield* HttpServerRequest.HttpServerRequest
          const token = Redacted.make(request.cookies[PortalApi.SESSION_COOKIE] ?? "")
          const account = yield* accounts.find(current.accountId)
          const session = yield* sessions.authenticate(token)
          if (Option.isNone(account) || Option.isNone(session)) return yield* Effect.dieMessage("The session's account vanished")
          return {
            account: { id: account.value.id, name: account.value.name, mode: account.value.mode },
            csrf_token: csrfToken(token),
            expires_at: iso(session.value.expiresAt),
            idle_timeout_seconds: Math.round(Duration.toSeconds(IDLE_TIMEOUT))
          }
        }))
      .handle("logout", () => Effect.flatMap(CurrentSession, (current) => sessions.revoke(current.sessionId)))
  }))

const keyView = (k: IntegrationKeys.KeySummary): PortalApi.KeyView => ({
  id: k.id,
  label: k.label,
  last_four: k.last_four,
  created_at: iso(k.created_at),
  last_used_at: isoOrNull(k.last_used_at),
  disabled_at: isoOrNull(k.disabled_at)
})

/** Every key of the account, oldest first (an account has a handful). */
const allKeys = (keys: IntegrationKeys.IntegrationKeys, accountId: string) =>
  Effect.map(
    keys.list(accountId, { limit: 1000 }).pipe(Effect.catchAll(() => Effect.succeed({ items: [] as ReadonlyArray<IntegrationKeys.KeySummary> }))),
    (page) => page.items
  )

const KeysLive = HttpApiBuilder.group(PortalApi.PortalApi, "keys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* IntegrationKeys.IntegrationKeys
    return handlers
      .handle("list", () => Effect.flatMap(CurrentSession, ({ accountId }) => Effect.map(allKeys(keys, accountId), (all) => ({ keys: all.map(keyView) }))))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const created = yield* keys.create(accountId, payload.label === "" ? undefined : payload.label).pipe(Effect.orDie)
          const summary = yield* keys.find(accountId, created.id)
          if (Option.isNone(summary)) return yield* Effect.dieMessage("A created key vanished")
          return { ...keyView(summary.value), key: Redacted.value(created.key) }
        }))
      .handle("disable", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          if (Option.isNone(yield* keys.find(accountId, path.keyId))) return yield* new Events.NotFound({ error: messages.unknownKey })
          yield* keys.disable(path.keyId).pipe(Effect.orDie)
        }))
  }))

/** Removed hooks the list shows (the latest). */
const REMOVED_SHOWN = 20

const hookView = (s: Subscriptions.SubscriptionSummary, key: IntegrationKeys.KeySummary | undefined): PortalApi.HookView => ({
  id: s.id,
  target_url: s.target_url,
  event: s.event,
  created_at: iso(s.created_at),
  created_by_key: s.created_by_key_id === null
    ? null
    : { id: s.created_by_key_id, label: key?.label ?? null, last_four: key?.last_four ?? null },
  state: stateOf(s),
  failing_since: isoOrNull(s.failing_since),
  disabled_at: isoOrNull(s.disabled_at),
  disabled_reason: s.disabled_reason,
  removed_at: isoOrNull(s.removed_at),
  removed_reason: s.removed_reason === null ? null : s.removed_reason === "gone" ? "gone" : "unsubscribed"
})

const HooksLive = HttpApiBuilder.group(PortalApi.PortalApi, "hooks", (handlers) =>
  Effect.gen(function*() {
    const subscriptions = yield* Subscriptions.Subscriptions
    const lifecycle = yield* SubscriptionLifecycle.SubscriptionLifecycle
    const recoveries = yield* Recoveries.Recoveries
    const keys = yield* IntegrationKeys.IntegrationKeys
    const fanout = yield* Fanout.Fanout
    const hooksOf = (accountId: string) =>
      Effect.gen(function*() {
        const byId = new Map((yield* allKeys(keys, accountId)).map((k) => [k.id as string, k]))
        const page = yield* subscriptions.page(accountId, { limit: 1000, removed: true }).pipe(Effect.orDie)
        const views = page.items.map((s) => hookView(s, s.created_by_key_id === null ? undefined : byId.get(s.created_by_key_id)))
        const removed = views.filter((h) => h.removed_at !== null)
          .sort((a, b) => (b.removed_at ?? "").localeCompare(a.removed_at ?? ""))
          .slice(0, REMOVED_SHOWN)
        const { count, limit } = yield* subscriptions.usage(accountId)
        return { hooks: views.filter((h) => h.removed_at === null), removed, count, limit }
      })
    return handlers
      .handle("list", () => Effect.flatMap(CurrentSession, ({ accountId }) => hooksOf(accountId)))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId, sessionId } = yield* CurrentSession
          const id = yield* subscriptions.create({
            accountId: accountId as Accounts.AccountId,
            keyId: null,
            sessionId,
            targetUrl: payload.target_url,
            event: payload.event
          }).pipe(Effect.catchTag("TooManySubscriptions", (refused) => new Events.BadRequest({ error: messages.tooManyHooks(refused.count, refused.limit) })))
          const hook = (yield* hooksOf(accountId)).hooks.find((h) => h.id === id)
          if (hook === undefined) return yield* Effect.dieMessage("A created hook vanished")
          return hook
        }))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const removed = yield* subscriptions.remove(accountId as Accounts.AccountId, path.id)
          if (!removed) return yield* new Events.NotFound({ error: messages.unknownHook })
        }))
      .handle("test", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const sent = yield* fanout.test(accountId, path.id)
          if (Option.isNone(sent)) return yield* new Events.NotFound({ error: messages.unknownHook })
          return { delivery_id: sent.value }
        }))
      // The lifecycle's own service, as the internal API and the CLI call it; the audit line names the session.
      .handle("disable", ({ path }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          lifecycle.disable(accountId, path.id, messages.disabledHere).pipe(
            Effect.map((outcome) => ({ id: path.id, outcome })),
            Effect.catchTag("SubscriptionNotFound", notFound)
          )))
      .handle("enable", ({ path }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          lifecycle.enable(accountId, path.id).pipe(
            Effect.map((outcome) => ({ id: path.id, outcome })),
            Effect.catchTag("SubscriptionNotFound", notFound)
          )))
      .handle("recover", ({ path, payload }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          recoveries.start(accountId, path.id, payload).pipe(Effect.map(recoveryView), Effect.catchTags(recoverRefusals))))
      .handle("recovery", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const found = yield* recoveries.find(accountId, path.id)
          if (Option.isNone(found)) return yield* new Events.NotFound({ error: messages.unknownRecovery })
          return recoveryView(found.value)
        }))
  }))

const SigningSecretLive = HttpApiBuilder.group(PortalApi.PortalApi, "signingSecret", (handlers) =>
  Effect.gen(function*() {
    const secrets = yield* SigningSecrets.SigningSecrets
    const view = (set: SigningSecrets.SigningSet): PortalApi.SigningSecretView => ({
      created_at: iso(set.createdAt),
      rotated_at: Option.getOrNull(Option.map(set.rotatedAt, iso)),
      previous_until: Option.getOrNull(Option.map(set.previousUntil, iso))
    })
    return handlers
      .handle("get", () => Effect.flatMap(CurrentSession, ({ accountId }) => secrets.signing(accountId).pipe(Effect.orDie, Effect.map(view))))
      .handle("reveal", () =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const set = yield* secrets.signing(accountId).pipe(Effect.orDie)
          // Reading a secret is no change, but who saw it is worth a line.
          yield* Audit.record("signing_secret.revealed", { account_id: accountId })
          return {
            secret: Redacted.value(set.current),
            previous_secret: Option.getOrNull(Option.map(set.previous, Redacted.value))
          }
        }))
      .handle("rotate", ({ payload }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          secrets.rotate(accountId, Duration.hours(payload.overlap_hours)).pipe(Effect.orDie, Effect.map(view))))
  }))

/** The check's failure in the page's words: what happened, and the next step when we know it. */
const checkError = (
  error: Connections.ConnectError | Connections.ConnectionNotFound
): Effect.Effect<never, PortalApi.ConnectionNotAllowed | PortalApi.InvalidConnection | PortalApi.CheckFailed> => {
  switch (error._tag) {
    case "AccountNotFound":
    case "ConnectionNotFound":
      return Effect.dieMessage(`Unexpected ${error._tag} for a session's account`)
    case "ConnectionNotAllowed":
      return Effect.fail(new PortalApi.ConnectionNotAllowed({ error: messages.notAllowed(error.mode) }))
    case "InvalidConnection":
      return Effect.fail(new PortalApi.InvalidConnection({ error: error.message, field: error.field }))
    case "CheckFailed":
      return Effect.fail(
        new PortalApi.CheckFailed({
          error: error.message,
          ...(error.diagnosis !== undefined
            ? { next_step: error.diagnosis.nextStep }
            : error.failure === "Auth"
            ? { next_step: "Check the API key (or the OAuth client ID and secret) against the bridge's configuration." }
            : error.reason === "unreachable"
            ? { next_step: "Check that the bridge is running and reachable, then test again." }
            : {})
        })
      )
  }
}

const formSettings = (form: PortalApi.ConnectionForm): Connections.ConnectionSettings =>
  toSettings({
    transport: form.transport,
    url: form.url,
    auth: form.auth.type === "api_key"
      ? form.auth
      : {
        type: "oauth",
        token_url: form.auth.token_url,
        client_id: form.auth.client_id,
        client_secret: form.auth.client_secret,
        ...(form.auth.scope === undefined || form.auth.scope === "" ? {} : { scope: form.auth.scope })
      }
  })

const ConnectionsLive = HttpApiBuilder.group(PortalApi.PortalApi, "connections", (handlers) =>
  Effect.gen(function*() {
    const connections = yield* Connections.Connections
    const accounts = yield* Accounts.Accounts
    // The check speaks through the server's own egress, token cache and transports.
    const bridgeSide = yield* Effect.context<Egress | TokenCache | TransportRegistry>()
    const view = (c: Connections.ConnectionSummary): PortalApi.ConnectionView => ({
      tenant_id: c.tenantId,
      transport: c.transport,
      url: c.url,
      auth: c.auth.type === "api_key"
        ? { type: "api_key", token_url: null, client_id: null, scope: null }
        : { type: "oauth", token_url: c.auth.tokenUrl, client_id: c.auth.clientId, scope: c.auth.scope ?? null },
      // The secret is stored with the configuration: it was set when the connection last changed.
      secret_set_at: iso(c.checkedAt),
      capabilities: c.capabilities,
      checked_at: iso(c.checkedAt)
    })
    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const account = yield* accounts.find(accountId)
          const mode = Option.match(account, { onNone: () => "live", onSome: (a) => a.mode })
          const page = yield* connections.list(accountId, { limit: 1000 }).pipe(Effect.orDie)
          return {
            allowed: mode === "live",
            reason: mode === "live" ? null : messages.notAllowed(mode),
            connections: page.connections.map(view)
          }
        }))
      .handle("test", ({ path, payload }) =>
        Effect.flatMap(CurrentSession, ({ accountId }) =>
          connections.probe(accountId, path.tenantId, formSettings(payload)).pipe(
            Effect.catchAll(checkError),
            Effect.map((capabilities) => ({ capabilities }))
          )))
      .handle("check", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          const mode = Option.match(yield* accounts.find(accountId), { onNone: () => "live", onSome: (a) => a.mode })
          if (mode !== "live") return yield* new PortalApi.ConnectionNotAllowed({ error: messages.notAllowed(mode) })
          // Read-only: the page never runs the write level, which needs a test tenant.
          const report = yield* StoredConnectionCheck.run(connections, accountId, path.tenantId, false).pipe(
            Effect.provide(bridgeSide),
            Effect.catchTags({
              AccountNotFound: () => Effect.dieMessage("The session's account vanished"),
              ConnectionNotFound: () => new Events.NotFound({ error: messages.noConnection(path.tenantId) }),
              InvalidConnection: (error) => new PortalApi.InvalidConnection({ error: error.message, field: error.field })
            })
          )
          yield* Audit.record("connection.conformance_checked", {
            account_id: accountId,
            tenant_id: path.tenantId,
            earned_level: report.earned_level,
            passed: report.passed
          })
          return report
        }))
      .handle("save", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentSession
          yield* connections.set(accountId, path.tenantId, formSettings(payload)).pipe(Effect.catchAll(checkError))
          const saved = yield* connections.summary(accountId, path.tenantId).pipe(Effect.orDie)
          if (Option.isNone(saved)) return yield* Effect.dieMessage("A saved connection vanished")
          return view(saved.value)
        }))
  }))

/** The Integrations area's API with its handlers (sessions, the services of the server's context). */
export const layer = HttpApiBuilder.api(PortalApi.PortalApi).pipe(
  Layer.provide([SessionLive, KeysLive, HooksLive, SigningSecretLive, ConnectionsLive, ActivityLive, DestinationsLive]),
  Layer.provide(PortalAuthLive),
  Layer.provide(Layer.mergeAll(
    Deliveries.Deliveries.Default,
    SubscriptionLifecycle.SubscriptionLifecycle.Default,
    Recoveries.Recoveries.Default
  )),
  Layer.provide(RateLimiter.layerWithPolicy(rateLimitPolicy)),
  Layer.provideMerge(PortalSessions.Default)
)
