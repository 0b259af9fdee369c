/**
 * The Zapier app against a running crm-relay, every operation through Zapier's
 * app tester with its output checks on: authentication, both hook triggers from
 * subscribe to unsubscribe with a real call outcome delivered (signed, over
 * HTTPS) and performed, the preview before and after calls, and the errors a
 * Zapier user meets.
 */
import { Events } from "@crm-relay/contract"
import { Eventually, MinuteWindow } from "@crm-relay/testing"
import { expect, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import contract from "../lib/contract.json" with { type: "json" }
import { Harness, layer as harness, newKey, request } from "./support/Harness.mjs"
import { refusedUrl, stub } from "./support/StubServer.mjs"
import { App, leafPaths, zap, zapFails } from "./support/Zap.mjs"

const lead = App.triggers.new_lead.operation
const booking = App.triggers.new_booking.operation

const caller = {
  full_name: "Dana Whitfield",
  first_name: "Dana",
  last_name: "Whitfield",
  phones: ["+15551234567"],
  emails: ["dana@example.com"],
  address: "42 Elm Street, Springfield",
  postal_code: "62704"
}

const outcome = (accountId: string, classification: "lead" | "booking", extra: Record<string, unknown> = {}) => ({
  account_id: accountId,
  tenant_id: "tenant-zapier",
  classification,
  source: "AI receptionist (phone)",
  tags: ["inbound"],
  caller,
  lead: { job_type: "Water heater repair", summary: "No hot water since this morning.", notes: "", urgency: "today" },
  ...extra
})

/** Posts a call outcome on the internal API; answers the 202 body. */
const postOutcome = (callId: string, body: unknown) =>
  Effect.gen(function*() {
    const answer = yield* (yield* Harness).admin("POST", `/v1/calls/${callId}/outcome`, body)
    expect(answer.status, JSON.stringify(answer.json)).toBe(202)
    return answer.json as { route: string; deliveries?: number }
  })

/** Waits for the receiver to get the delivery of `callId` (a bound against a hang, not a measure). */
const deliveryOf = (callId: string) =>
  Effect.gen(function*() {
    const { receiver } = yield* Harness
    return yield* Effect.suspend(() => {
      const found = receiver.deliveries().find((d) => (JSON.parse(d.body) as { call_id: string }).call_id === callId)
      return found === undefined ? Effect.fail("not yet") : Effect.succeed(found)
    }).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(Eventually.HANG_BOUND))), Effect.orDie)
  })

const keysOf = (kind: "lead" | "booking") => contract[kind].outputFields.map((field) => field.key).sort()

layer(harness, { excludeTestServices: true, timeout: 600_000 })("the Zapier app against crm-relay serve", (it) => {
  it.effect("authentication: the test is GET /perform-list?limit=1 with the key as Bearer; the connection label names the host and the key's last four", () =>
    Effect.gen(function*() {
      const { publicUrl, key } = yield* Harness
      const authData = { base_url: `${publicUrl}/`, api_key: ` ${key} ` }
      const tested = (yield* zap(App.authentication.test, { authData })) as { host: string; last_four: string; previewed: number }
      expect(tested).toEqual({ host: new URL(publicUrl).host, last_four: key.slice(-4), previewed: 1 })
      const label = yield* zap(App.authentication.connectionLabel, { authData, inputData: tested })
      expect(label).toBe(`${new URL(publicUrl).host} (key …${key.slice(-4)})`)
    }))

  it.effect("new_lead: preview before any call is the synthetic example; subscribe; a real call outcome is delivered signed and performed with every field mapped; preview after shows it; unsubscribe, twice → 404; no delivery once the Zap is off", () =>
    Effect.gen(function*() {
      const { publicUrl, key, accountId, receiver, admin } = yield* Harness
      const authData = { base_url: publicUrl, api_key: key }

      // "When the account has no delivery records, the array contains a synthetic example record."
      expect(yield* zap(lead.performList, { authData, meta: { isLoadingSample: true } })).toEqual([Events.SAMPLE_PREVIEW])

      const subscribed = (yield* zap(lead.performSubscribe, { authData, targetUrl: receiver.url })) as { id: string }
      expect(subscribed.id).toMatch(/^[0-9a-f-]{36}$/)
      const hooks = (yield* admin("GET", `/v1/accounts/${accountId}/subscriptions`)).json as { subscriptions: Array<{ id: string; event: string; target: string }> }
      expect(hooks.subscriptions.map((s) => [s.id, s.event, s.target])).toEqual([[subscribed.id, "lead", receiver.url]])

      const callId = `call-zapier-lead-${randomUUID()}`
      expect(yield* postOutcome(callId, outcome(accountId, "lead"))).toMatchObject({ route: "event", deliveries: 1 })
      const delivery = yield* deliveryOf(callId)
      expect(delivery.verified, delivery.problem).toBe(true)
      const body = JSON.parse(delivery.body) as Record<string, unknown>

      const performed = yield* zap(lead.perform, { authData, cleanedRequest: body, targetUrl: receiver.url, subscribeData: subscribed })
      expect(performed).toEqual([body])
      expect(body).toMatchObject({ event: "lead", call_id: callId, contact: { full_name: "Dana Whitfield", phones: ["+15551234567"] }, job_type: "Water heater repair" })
      // Every field of the live delivery has an output field, and every output field names a path the delivery has.
      expect(leafPaths(body).sort()).toEqual(keysOf("lead"))
      // The sample has the shape of the live delivery.
      expect(leafPaths(lead.sample).sort()).toEqual(leafPaths(body).sort())

      // The preview now samples the real delivery: its id is the delivered event's id; by the contract it carries no name.
      const after = (yield* zap(lead.performList, { authData })) as Array<Events.PreviewRecord>
      expect(after[0]).toEqual({
        id: body["id"],
        call_id: callId,
        source: "AI receptionist (phone)",
        contact: { external_id: "" },
        job_type: "",
        summary: "",
        booked: false
      })

      expect(yield* zap(lead.performUnsubscribe, { authData, subscribeData: subscribed })).toEqual({ id: subscribed.id, removed: true })
      const again = yield* zapFails(lead.performUnsubscribe, { authData, subscribeData: subscribed })
      expect(again).toMatchObject({ name: "AppError", code: "SubscriptionNotFound", status: 404 })
      expect(again.message).toContain("already removed")

      // The Zap is off: the next call's event has no subscription to go to.
      expect(yield* postOutcome(`call-zapier-off-${randomUUID()}`, outcome(accountId, "lead"))).toMatchObject({ route: "event", deliveries: 0 })
    }))

  it.effect("new_booking: a booked call is delivered as a booking event with its appointment, performed by new_booking and ignored by new_lead's perform", () =>
    Effect.gen(function*() {
      const { publicUrl, key, accountId, receiver } = yield* Harness
      const authData = { base_url: publicUrl, api_key: key }
      const subscribed = (yield* zap(booking.performSubscribe, { authData, targetUrl: receiver.url })) as { id: string }

      const callId = `call-zapier-booking-${randomUUID()}`
      const accepted = yield* postOutcome(callId, outcome(accountId, "booking", {
        booking: {
          status: "booked",
          appointment_external_id: "crm-appt-5521",
          start: "2026-03-02T09:00:00-06:00",
          end: "2026-03-02T10:00:00-06:00",
          timezone: "America/Chicago",
          slot_text: "Monday at 9 am",
          title: "Water heater repair – Whitfield",
          notes: "",
          address: "42 Elm Street, Springfield",
          job_type: "Water heater repair"
        }
      }))
      expect(accepted).toMatchObject({ route: "event", deliveries: 1 })
      const delivery = yield* deliveryOf(callId)
      expect(delivery.verified, delivery.problem).toBe(true)
      const body = JSON.parse(delivery.body) as Record<string, unknown>
      expect(body).toMatchObject({ event: "booking", booked: true, appointment: { external_id: "crm-appt-5521", status: "scheduled", slot_text: "Monday at 9 am" } })

      expect(yield* zap(booking.perform, { authData, cleanedRequest: body })).toEqual([body])
      expect(yield* zap(lead.perform, { authData, cleanedRequest: body })).toEqual([])
      expect(leafPaths(body).sort()).toEqual(keysOf("booking"))
      expect(leafPaths(booking.sample).sort()).toEqual(leafPaths(body).sort())

      const preview = (yield* zap(booking.performList, { authData })) as Array<Events.PreviewRecord>
      expect(preview[0]).toMatchObject({ id: body["id"], call_id: callId, booked: true })
      expect(yield* zap(booking.performUnsubscribe, { authData, subscribeData: subscribed })).toEqual({ id: subscribed.id, removed: true })
    }))

  it.effect("401: a disabled key and an unknown key of the right form become Zapier's expired-connection error that says how to get a new key", () =>
    Effect.gen(function*() {
      const { publicUrl, accountId, admin } = yield* Harness
      const created = yield* newKey(accountId)
      expect((yield* admin("POST", `/v1/keys/${created.id}/disable`)).status).toBe(204)
      for (const apiKey of [created.key, `crk_${"A".repeat(43)}`]) {
        const error = yield* zapFails(App.authentication.test, { authData: { base_url: publicUrl, api_key: apiKey } })
        expect(error.name).toBe("ExpiredAuthError")
        expect(error.message).toContain("crm-relay refused the integration key (401)")
        expect(error.message).toContain("Integrations area")
      }
    }))

  it.effect("429: past 60 requests per key per minute, performList fails with Zapier's ThrottledError carrying the Retry-After", () =>
    Effect.gen(function*() {
      const { publicUrl, accountId } = yield* Harness
      const { key } = yield* newKey(accountId)
      // The limit counts per minute of the clock: crossing one between the 61st request and Zapier's would let Zapier's through.
      yield* MinuteWindow.withinOne()
      let limited = yield* request("GET", `${publicUrl}/perform-list?limit=1`, { token: key })
      for (let n = 1; n < 61 && limited.status !== 429; n++) limited = yield* request("GET", `${publicUrl}/perform-list?limit=1`, { token: key })
      expect(limited.status).toBe(429)
      const error = yield* zapFails(lead.performList, { authData: { base_url: publicUrl, api_key: key } })
      expect(error.name).toBe("ThrottledError")
      expect(error.message).toContain("rate limit")
      expect(error.delay).toBeGreaterThan(0)
      expect(error.delay).toBeLessThanOrEqual(60)
      expect(error.delay).toBeLessThanOrEqual(Number(limited.headers.get("retry-after")))
    }))

  it.effect("502 from a proxy in front of crm-relay becomes Zapier's retryable ThrottledError (Retry-After honoured, a minute without one)", () =>
    Effect.gen(function*() {
      const { key } = yield* Harness
      const unavailable = JSON.stringify({ error: "The service could not be reached; retry later." })
      for (const [headers, delay] of [[{ "content-type": "application/json", "retry-after": "17" }, 17], [{ "content-type": "application/json" }, 60]] as const) {
        const base = yield* stub(502, headers, unavailable)
        const error = yield* zapFails(lead.performSubscribe, { authData: { base_url: base, api_key: key }, targetUrl: "https://hooks.zapier.com/x" })
        expect(error).toMatchObject({ name: "ThrottledError", delay })
        expect(error.message).toContain("could not be reached just now (502)")
        expect(error.message).toContain("check the hooks card")
      }
    }).pipe(Effect.scoped))

  it.effect("bad input: an unreachable base URL, http outside loopback, a URL with a query, keys of the wrong form, and a base URL that is not the Event API each give an actionable Zapier error, never a stack trace", () =>
    Effect.gen(function*() {
      const { publicUrl, key } = yield* Harness
      const cases: Array<readonly [Record<string, string>, string, string]> = [
        [{ base_url: yield* refusedUrl, api_key: key }, "Unreachable", "the connection was refused. Check the base URL"],
        [{ base_url: "http://events.example.com", api_key: key }, "InvalidBaseUrl", "must start with https://"],
        [{ base_url: "ftp://events.example.com", api_key: key }, "InvalidBaseUrl", "must start with https://"],
        [{ base_url: "events.example.com", api_key: key }, "InvalidBaseUrl", "is not a URL"],
        [{ base_url: `${publicUrl}?key=${key}`, api_key: key }, "InvalidBaseUrl", "must not carry"],
        [{ base_url: "", api_key: key }, "InvalidBaseUrl", "is missing"],
        [{ base_url: publicUrl, api_key: `Bearer ${key}` }, "InvalidKey", "without \"Bearer \""],
        [{ base_url: publicUrl, api_key: randomUUID() }, "InvalidKey", "the id of an integration key, not the key itself"],
        [{ base_url: publicUrl, api_key: key.slice(0, -3) }, "InvalidKey", "is not a crm-relay integration key"],
        [{ base_url: publicUrl, api_key: "" }, "InvalidKey", "is missing"],
        [{ base_url: yield* stub(200, { "content-type": "text/html" }, "<html>Welcome</html>"), api_key: key }, "NotEventApi", "is not the crm-relay Event API"],
        [{ base_url: yield* stub(404, { "content-type": "text/plain" }, "Not Found"), api_key: key }, "NotEventApi", "No crm-relay Event API answers at this base URL"]
      ]
      for (const [authData, code, sentence] of cases) {
        const error = yield* zapFails(App.authentication.test, { authData })
        expect(error, JSON.stringify(authData)).toMatchObject({ name: "AppError", code })
        expect(error.message).toContain(sentence)
        expect(error.message).not.toMatch(/\n\s+at /)
      }
      // A subscribe at a base URL with no Event API is not mistaken for a missing subscription.
      const elsewhere = yield* stub(404, { "content-type": "text/plain" }, "Not Found")
      const subscribe = yield* zapFails(lead.performSubscribe, { authData: { base_url: `${elsewhere}/crm`, api_key: key }, targetUrl: "https://hooks.zapier.com/x" })
      expect(subscribe).toMatchObject({ name: "AppError", code: "NotEventApi", status: 404 })
      expect(subscribe.message).toContain("404 for POST /crm/subscribe")
    }).pipe(Effect.scoped))
})
