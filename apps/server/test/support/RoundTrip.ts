/**
 * The operator's first round trip against a running crm-relay, from outside
 * its process (a released executable, a container): an account and its key,
 * a subscription of a loopback HTTPS receiver, a call outcome, and the lead
 * event delivered to the receiver with a signature it verifies.
 */
import { Eventually, WebhookReceiver } from "@crm-relay/testing"
import { Duration, Effect } from "effect"
import { randomUUID } from "node:crypto"
import { expect } from "vitest"
import { leadOutcome, request } from "./TestServer.js"

/** Where a running server answers, and its admin token. */
export interface Running {
  readonly adminUrl: string
  readonly publicUrl: string
  readonly adminToken: string
}

/** What the round trip created. */
export interface Created {
  readonly accountId: string
  readonly key: string
  readonly subscriptionId: string
}

const json = (token: string) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" })

/** Creates an account, a key and a subscription of `receiver`, posts a lead outcome, and waits for its signed delivery. */
export const roundTrip = (server: Running, receiver: WebhookReceiver.Receiver) =>
  Effect.gen(function*() {
    const admin = (method: string, path: string, body?: unknown) =>
      request(method, `${server.adminUrl}${path}`, { headers: json(server.adminToken), ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    expect((yield* request("GET", `${server.adminUrl}/readyz`)).status).toBe(200)
    const account = yield* admin("POST", "/v1/accounts", { name: "Release Plumbing", mode: "live" })
    expect(account.status).toBe(201)
    const accountId = String((account.json as { id: string }).id)
    const key = yield* admin("POST", `/v1/accounts/${accountId}/keys`)
    expect(key.status).toBe(201)
    const apiKey = String((key.json as { key: string }).key)
    const secret = yield* admin("GET", `/v1/accounts/${accountId}/signing-secret`)
    receiver.trust(String((secret.json as { secret: string }).secret))
    // Event API: "POST /subscribe ... 201 with the subscription's id".
    const subscribed = yield* request("POST", `${server.publicUrl}/subscribe`, { headers: json(apiKey), body: JSON.stringify({ targetUrl: receiver.url, event: "all" }) })
    expect(subscribed.status).toBe(201)
    const subscriptionId = String((subscribed.json as { id: string }).id)
    const before = receiver.deliveries().length
    const callId = `release-${randomUUID()}`
    const outcome = yield* admin("POST", `/v1/calls/${callId}/outcome`, leadOutcome(accountId))
    expect(outcome.status).toBe(202)
    yield* Eventually.eventually(Effect.sync(() => receiver.deliveries().length > before), Duration.minutes(5))
    const delivery = receiver.deliveries()[before]!
    // Event API: every delivery is signed (Standard Webhooks) with the account's signing secret.
    expect(delivery.problem).toBe("")
    expect(delivery.verified).toBe(true)
    expect(JSON.parse(delivery.body)).toMatchObject({ event: "lead", call_id: callId })
    return { accountId, key: apiKey, subscriptionId } satisfies Created
  })

/** The account, key and subscription are still there: the account shown, the key accepted, the subscription listed. */
export const stillThere = (server: Running, created: Created) =>
  Effect.gen(function*() {
    const account = yield* request("GET", `${server.adminUrl}/v1/accounts/${created.accountId}`, { headers: json(server.adminToken) })
    expect(account.status).toBe(200)
    // Event API: "A 200 proves the key resolves to a live account."
    expect((yield* request("GET", `${server.publicUrl}/perform-list`, { headers: json(created.key) })).status).toBe(200)
    const listed = yield* request("GET", `${server.adminUrl}/v1/accounts/${created.accountId}/subscriptions`, { headers: json(server.adminToken) })
    expect(listed.status).toBe(200)
    expect(listed.text).toContain(created.subscriptionId)
  })
