import { describe, expect, it, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Accounts, Deliveries } from "@crm-relay/events"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { TestDatabase } from "@crm-relay/store"
import { Clock, Duration, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { PortalSessions } from "../src/http/portal/PortalSessions.js"
import * as Bridge from "./support/ConnectionsServer.js"
import { bridgeSide } from "./support/LoopbackEgress.js"
import { admin, session, urls } from "./support/PortalSession.js"
import { layerServer, request } from "./support/TestServer.js"
import * as LogCapture from "./support/LogCapture.js"
import { Eventually } from "@crm-relay/testing"

/** The server's log lines, for the audit trail of the page's changes. */
const capture = LogCapture.make()

/** A server with its Integrations area on loopback (no built page needed: the API is what is tested). */
const Live = layerServer({
  portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.none() }
}).pipe(Layer.provide(capture.layer), Layer.provideMerge(TestDatabase.layer))

layer(Live)("Integrations area API", (it) => {
  it.effect("Access: the operator mints a single-use link (POST /v1/accounts/{id}/portal-sessions → {url, expires_at}, admin token required); it opens once, setting an HttpOnly, SameSite=Strict cookie; a second time it sets nothing", () =>
    Effect.gen(function*() {
      const { admin: adminUrl, portal } = yield* urls
      const account = (yield* admin("POST", "/v1/accounts", { name: "Once", mode: "live" })).json as { id: string }
      const unauthorized = yield* request("POST", `${adminUrl}/v1/accounts/${account.id}/portal-sessions`)
      expect(unauthorized.status).toBe(401)
      expect((yield* admin("POST", "/v1/accounts/0f8fad5b-d9cb-469f-a165-70867728950e/portal-sessions")).status).toBe(404)

      const minted = yield* admin("POST", `/v1/accounts/${account.id}/portal-sessions`)
      expect(minted.status).toBe(201)
      const link = minted.json as { url: string; expires_at: string }
      expect(link.url.startsWith(`${portal}/enter?token=`)).toBe(true)
      const ttl = new Date(link.expires_at).getTime() - (yield* Clock.currentTimeMillis)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(10 * 60_000)

      const first = yield* request("GET", link.url)
      expect([first.status, first.headers.get("location")]).toEqual([303, "/"])
      const cookie = first.headers.get("set-cookie") ?? ""
      expect(cookie).toMatch(/^crm_relay_portal=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/)
      const second = yield* request("GET", link.url)
      expect([second.status, second.headers.get("location"), second.headers.get("set-cookie")]).toEqual([303, "/?link=invalid", null])

      const me = yield* request("GET", `${portal}/api/session`, { headers: { cookie: cookie.split(";")[0]! } })
      expect(me.status).toBe(200)
      expect(me.json).toMatchObject({ account: { id: account.id, name: "Once", mode: "live" }, idle_timeout_seconds: 1800 })
      expect((yield* request("GET", `${portal}/api/session`)).status).toBe(401)
    }))

  it.effect("every answer of the portal's listener carries the strict CSP (default-src 'self'), no-referrer and nosniff; the page answers 503 with the next step when it was not built", () =>
    Effect.gen(function*() {
      const { portal } = yield* urls
      for (const path of ["/", "/api/session", "/enter?token=nothing", "/no-such-path"]) {
        const answer = yield* request("GET", `${portal}${path}`)
        expect(answer.headers.get("content-security-policy")).toMatch(/^default-src 'self';/)
        expect(answer.headers.get("referrer-policy")).toBe("no-referrer")
        expect(answer.headers.get("x-content-type-options")).toBe("nosniff")
      }
      const page = yield* request("GET", `${portal}/`)
      expect([page.status, page.text]).toEqual([503, "The Integrations area's page has not been built: run `npm run build`, then restart crm-relay."])
    }))

  it.effect("the Integrations area is served on its own listener only: the public Event API port and the internal port answer 404 for its routes", () =>
    Effect.gen(function*() {
      const u = yield* urls
      for (const base of [u.public, u.admin]) {
        for (const path of ["/api/session", "/enter?token=x", "/"]) {
          expect((yield* request("GET", `${base}${path}`)).status).toBe(404)
        }
      }
    }))

  it.effect("CSRF: a change without the session's x-csrf-token is refused 403 and changes nothing; with it, the change is made, and the key is shown in that answer only", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const refused = yield* me.call("POST", "/api/keys", { label: "no token" }, false)
      expect([refused.status, refused.json]).toEqual([403, { error: "This change did not carry the page's security token; reload the page and try again." }])
      expect(((yield* me.call("GET", "/api/keys")).json as { keys: Array<unknown> }).keys).toEqual([])

      const created = yield* me.call("POST", "/api/keys", { label: "Zapier" })
      expect(created.status).toBe(201)
      const key = created.json as { id: string; key: string; label: string; last_four: string }
      expect(key.label).toBe("Zapier")
      expect(key.key.endsWith(key.last_four)).toBe(true)
      // Listed without the key, ever again.
      const listed = yield* me.call("GET", "/api/keys")
      expect(listed.text).not.toContain(key.key)
    }))

  it.effect("Isolation: one account's session cannot see or change another's keys, hooks, deliveries or pushes — an id of the other account answers 404, as an unknown one", () =>
    Effect.gen(function*() {
      const mine = yield* session()
      const theirs = yield* session()
      const key = (yield* theirs.call("POST", "/api/keys", { label: "theirs" })).json as { id: string }
      const hook = (yield* theirs.call("POST", "/api/hooks", { target_url: "https://hooks.example.com/theirs", event: "lead" })).json as { id: string }
      const test = (yield* theirs.call("POST", `/api/hooks/${hook.id}/test`)).json as { delivery_id: string }

      expect(((yield* mine.call("GET", "/api/keys")).json as { keys: Array<unknown> }).keys).toEqual([])
      expect(((yield* mine.call("GET", "/api/hooks")).json as { hooks: Array<unknown> }).hooks).toEqual([])
      expect(((yield* mine.call("GET", "/api/deliveries")).json as { deliveries: Array<unknown> }).deliveries).toEqual([])
      for (const [method, path] of [
        ["POST", `/api/keys/${key.id}/disable`],
        ["DELETE", `/api/hooks/${hook.id}`],
        ["POST", `/api/hooks/${hook.id}/test`],
        ["GET", `/api/deliveries/${test.delivery_id}`],
        ["POST", `/api/deliveries/${test.delivery_id}/replay`],
        ["POST", `/api/pushes/${test.delivery_id}/replay`]
      ] as const) {
        expect([method, path, (yield* mine.call(method, path)).status]).toEqual([method, path, 404])
      }
      // Theirs is untouched.
      const still = (yield* theirs.call("GET", "/api/keys")).json as { keys: Array<{ disabled_at: string | null }> }
      expect(still.keys.map((k) => k.disabled_at)).toEqual([null])
      expect(((yield* theirs.call("GET", "/api/hooks")).json as { hooks: Array<unknown> }).hooks).toHaveLength(1)
    }))

  it.effect("Replay in the Activity card of a delivery whose hook was removed or is disabled is refused, 409 with the reason and what to do next (the same sentence as the internal API and the CLI)", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const replayOf = (hookTarget: string) =>
        Effect.gen(function*() {
          const hook = (yield* me.call("POST", "/api/hooks", { target_url: hookTarget, event: "lead" })).json as { id: string }
          const test = (yield* me.call("POST", `/api/hooks/${hook.id}/test`)).json as { delivery_id: string }
          return { hook: hook.id, delivery: test.delivery_id }
        })

      const removed = yield* replayOf("https://hooks.example.com/removed")
      expect((yield* me.call("DELETE", `/api/hooks/${removed.hook}`)).status).toBe(204)
      const refusedRemoved = yield* me.call("POST", `/api/deliveries/${removed.delivery}/replay`)
      expect([refusedRemoved.status, refusedRemoved.json]).toEqual([409, { error: Deliveries.notReplayable.subscription_removed }])

      const disabled = yield* replayOf("https://hooks.example.com/disabled")
      expect((yield* me.call("POST", `/api/hooks/${disabled.hook}/disable`)).status).toBe(200)
      const refusedDisabled = yield* me.call("POST", `/api/deliveries/${disabled.delivery}/replay`)
      expect([refusedDisabled.status, refusedDisabled.json]).toEqual([409, { error: Deliveries.notReplayable.subscription_disabled }])
    }))

  it.effect("a hook added by hand is listed as made in the page; a test event is a delivery marked test that the perform-list preview never samples", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const hook = (yield* me.call("POST", "/api/hooks", { target_url: "https://hooks.example.com/x", event: "all" })).json as Record<string, unknown>
      expect(hook).toMatchObject({ target_url: "https://hooks.example.com/x", event: "all", created_by_key: null })
      const sent = yield* me.call("POST", `/api/hooks/${String(hook.id)}/test`)
      expect(sent.status).toBe(202)
      const listed = (yield* me.call("GET", "/api/deliveries")).json as { deliveries: Array<{ test: boolean; event: string }> }
      expect(listed.deliveries.map((d) => [d.event, d.test])).toEqual([["lead", true]])
      const key = (yield* me.call("POST", "/api/keys", { label: "" })).json as { key: string }
      const { public: publicUrl } = yield* urls
      const preview = yield* request("GET", `${publicUrl}/perform-list`, { headers: { authorization: `Bearer ${key.key}` } })
      expect((preview.json as Array<{ id: string }>)[0]!.id).not.toBe((listed.deliveries[0] as unknown as { id: string }).id)
      expect((preview.json as Array<{ call_id: string }>)[0]!.call_id.startsWith("test_")).toBe(false)
    }))

  it.effect("Connection form: a demo account's test and save are refused 409 with why, and the listing says it may not connect", () =>
    Effect.gen(function*() {
      const me = yield* session("demo")
      const listing = (yield* me.call("GET", "/api/connections")).json as { allowed: boolean; reason: string }
      expect(listing.allowed).toBe(false)
      expect(listing.reason).toContain("demo account: its calls never reach a real CRM")
      const form = { transport: "rest", url: "https://bridge.example.com/crm", auth: { type: "api_key", key: "k" } }
      for (const [method, path] of [["POST", "/api/connections/t-1/test"], ["PUT", "/api/connections/t-1"]] as const) {
        const answer = yield* me.call(method, path, form)
        expect(answer.status).toBe(409)
      }
    }))

  it.effect("sign out revokes the session: its cookie is refused from then on", () =>
    Effect.gen(function*() {
      const me = yield* session()
      expect((yield* me.call("POST", "/api/session/logout")).status).toBe(204)
      expect((yield* me.call("GET", "/api/keys")).status).toBe(401)
    }))

  it.effect("Hook lifecycle (issue 16: disabled \"with the reason shown\", \"re-enabling is one action\", recover refused for \"a recover window in the future or reversed\" and while disabled, \"nothing changed\"): each change needs the CSRF token, goes through the internal API's services and writes an audit line naming the session", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const hook = (yield* me.call("POST", "/api/hooks", { target_url: "https://hooks.example.com/lifecycle", event: "lead" })).json as { id: string }
      const hooks = Effect.map(me.call("GET", "/api/hooks"), (a) => a.json as { hooks: Array<Record<string, unknown>>; removed: Array<Record<string, unknown>> })
      expect((yield* hooks).hooks[0]).toMatchObject({ id: hook.id, state: "active", disabled_at: null, disabled_reason: null })

      expect((yield* me.call("POST", `/api/hooks/${hook.id}/disable`, undefined, false)).status).toBe(403)
      expect((yield* hooks).hooks[0]).toMatchObject({ state: "active" })
      const disabled = yield* me.call("POST", `/api/hooks/${hook.id}/disable`)
      expect([disabled.status, disabled.json]).toEqual([200, { id: hook.id, outcome: "disabled" }])
      const shown = (yield* hooks).hooks[0]!
      expect(shown).toMatchObject({ state: "disabled", disabled_reason: "Disabled in the Integrations area." })
      expect(typeof shown["disabled_at"]).toBe("string")

      const now = yield* Clock.currentTimeMillis
      const since = new Date(now - 3_600_000).toISOString()
      const whileDisabled = yield* me.call("POST", `/api/hooks/${hook.id}/recover`, { since })
      expect([whileDisabled.status, whileDisabled.json]).toEqual([409, { error: `Subscription ${hook.id} is disabled; enable it first, then recover.` }])

      const enabled = yield* me.call("POST", `/api/hooks/${hook.id}/enable`)
      expect([enabled.status, enabled.json]).toEqual([200, { id: hook.id, outcome: "enabled" }])
      expect((yield* hooks).hooks[0]).toMatchObject({ state: "active", disabled_at: null, disabled_reason: null })

      const future = yield* me.call("POST", `/api/hooks/${hook.id}/recover`, { since: new Date(now + 3_600_000).toISOString() })
      expect(future.status).toBe(400)
      expect((future.json as { error: string }).error).toContain("is in the future")
      const reversed = yield* me.call("POST", `/api/hooks/${hook.id}/recover`, { since, until: new Date(now - 7_200_000).toISOString() })
      expect(reversed.status).toBe(400)
      expect((reversed.json as { error: string }).error).toContain("The window is reversed")
      expect((yield* me.call("POST", `/api/hooks/${hook.id}/recover`, { since }, false)).status).toBe(403)

      const started = yield* me.call("POST", `/api/hooks/${hook.id}/recover`, { since })
      expect(started.status).toBe(202)
      const recovery = started.json as { id: string; status: string; total: number }
      expect(recovery).toMatchObject({ subscription_id: hook.id, status: "running", total: 0 })
      yield* Eventually.eventually(Effect.map(me.call("GET", `/api/recoveries/${recovery.id}`), (a) => (a.json as { status: string }).status === "done"))

      // Another account's session sees none of it.
      const theirs = yield* session()
      for (const [method, path] of [
        ["POST", `/api/hooks/${hook.id}/disable`],
        ["POST", `/api/hooks/${hook.id}/enable`],
        ["GET", `/api/recoveries/${recovery.id}`]
      ] as const) {
        expect([method, path, (yield* theirs.call(method, path)).status]).toEqual([method, path, 404])
      }
      expect((yield* theirs.call("POST", `/api/hooks/${hook.id}/recover`, { since })).status).toBe(404)

      // Removed by hand: listed among the removed hooks, with why.
      expect((yield* me.call("DELETE", `/api/hooks/${hook.id}`)).status).toBe(204)
      const after = yield* hooks
      expect(after.hooks).toEqual([])
      expect(after.removed[0]).toMatchObject({ id: hook.id, state: "removed", removed_reason: "unsubscribed" })

      const mine = (line: Record<string, unknown>) => line["subscription_id"] === hook.id && line["action"] !== "subscription.recovered"
      yield* Eventually.eventually(Effect.map(LogCapture.ofKind(capture, "audit"), (lines) => lines.filter(mine).length === 5))
      const audit = (yield* LogCapture.ofKind(capture, "audit")).filter(mine)
      expect(audit.map((line) => line["action"])).toEqual([
        "subscription.created",
        "subscription.disabled",
        "subscription.enabled",
        "subscription.recovery_started",
        "subscription.removed"
      ])
      for (const line of audit) expect(String(line["actor"])).toMatch(/^portal_session:/)
      expect(audit[1]).toMatchObject({ account_id: me.accountId, reason: "Disabled in the Integrations area." })
    }))
})

/** A server with its Integrations area whose egress reaches the reference bridge (real TLS on loopback). */
const WithBridge = Layer.unwrapEffect(
  Effect.map(ReferenceBridge.ReferenceBridge, (bridge) =>
    layerServer({
      role: "api",
      bridge: bridgeSide([bridge.ca]),
      masterKeys: Bridge.masterKeys,
      portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.none() }
    }))
).pipe(Layer.provideMerge(TestDatabase.layer), Layer.provideMerge(Bridge.BridgeLive))

layer(WithBridge)("Integrations area: the CRM bridge card's conformance check", (it) => {
  it.effect("POST /api/connections/{tenantId}/check runs the read-only check on the session's stored connection (the reference bridge passes, nothing is written to the CRM); another account's tenant answers 404, a missing CSRF token 403, a demo account 409", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      yield* bridge.control.reset
      const mine = yield* session()
      const saved = yield* mine.call("PUT", `/api/connections/${Bridge.TENANT.tenantId}`, Bridge.form(bridge, "rest", "api_key"))
      expect(saved.status).toBe(200)

      const path = `/api/connections/${Bridge.TENANT.tenantId}/check`
      const answer = yield* mine.call("POST", path)
      expect(answer.status).toBe(200)
      const report = answer.json as { passed: boolean; earned_level: string; requested_level: string; counts: { fail: number }; checks: Array<{ id: string; status: string; rule: string }> }
      expect(report).toMatchObject({ passed: true, earned_level: "read-only", requested_level: "read-only", tenant_id: Bridge.TENANT.tenantId })
      expect(report.counts.fail).toBe(0)
      expect(report.checks.map((c) => c.id)).toContain("capabilities.version")
      expect(report.checks.every((c) => c.rule.length > 0)).toBe(true)
      expect(answer.text).not.toContain(Bridge.TENANT.apiKey)
      const records = yield* bridge.control.records
      expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])

      const noCsrf = yield* mine.call("POST", path, undefined, false)
      expect(noCsrf.status).toBe(403)

      const theirs = yield* session()
      const other = yield* theirs.call("POST", path)
      expect([other.status, other.json]).toEqual([
        404,
        { error: `This account has no stored bridge connection for tenant ${Bridge.TENANT.tenantId}; save one first.` }
      ])

      const demo = yield* session("demo")
      expect((yield* demo.call("POST", path)).status).toBe(409)
    }))

})

describe("PortalSessions", () => {
  const Sessions = Layer.mergeAll(PortalSessions.Default, Accounts.Accounts.Default).pipe(Layer.provideMerge(TestDatabase.layer))

  it.layer(Sessions)((it) => {
    it.effect("a link opens only within 10 minutes; a session ends after 30 idle minutes, or 12 hours after it started however busy", () =>
      Effect.gen(function*() {
        const sessions = yield* PortalSessions
        const account = yield* (yield* Accounts.Accounts).create({ name: "Clock", mode: "live" })

        const late = yield* sessions.mint(account.id)
        yield* TestClock.adjust(Duration.minutes(10))
        expect(Option.isNone(yield* sessions.enter(Redacted.value(late.token)))).toBe(true)

        const idle = Option.getOrThrow(yield* sessions.enter(Redacted.value((yield* sessions.mint(account.id)).token)))
        yield* TestClock.adjust(Duration.minutes(29))
        expect(Option.isSome(yield* sessions.authenticate(idle.token))).toBe(true)
        yield* TestClock.adjust(Duration.minutes(29))
        expect(Option.isSome(yield* sessions.authenticate(idle.token))).toBe(true)
        yield* TestClock.adjust(Duration.minutes(31))
        expect(Option.isNone(yield* sessions.authenticate(idle.token))).toBe(true)

        const busy = Option.getOrThrow(yield* sessions.enter(Redacted.value((yield* sessions.mint(account.id)).token)))
        for (let i = 0; i < 24; i++) {
          yield* TestClock.adjust(Duration.minutes(29))
          yield* sessions.authenticate(busy.token)
        }
        yield* TestClock.adjust(Duration.minutes(25))
        expect(Option.isNone(yield* sessions.authenticate(busy.token))).toBe(true)
      }))

    it.effect("tokens are stored only as their SHA-256; revoking an account's sessions ends them all", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sessions = yield* PortalSessions
        const account = yield* (yield* Accounts.Accounts).create({ name: "Hashed", mode: "live" })
        const minted = yield* sessions.mint(account.id)
        const entered = Option.getOrThrow(yield* sessions.enter(Redacted.value(minted.token)))
        const rows = yield* sql<Record<string, unknown>>`SELECT * FROM portal_sessions WHERE account_id = ${account.id}`
        const dump = JSON.stringify(rows)
        expect(dump).not.toContain(Redacted.value(minted.token))
        expect(dump).not.toContain(Redacted.value(entered.token))
        expect(yield* sessions.revokeAccount(account.id)).toBe(1)
        expect(Option.isNone(yield* sessions.authenticate(entered.token))).toBe(true)
      }))
  })
})
