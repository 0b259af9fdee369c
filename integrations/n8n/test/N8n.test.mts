/**
 * The package in a real n8n (2.41.1, HTTPS on loopback) against `crm-relay serve`: the credential's
 * test and its bad inputs, the trigger's webhook lifecycle as the Event API's subscribe and
 * unsubscribe, a real call outcome delivered (signed, over HTTPS) and run as an execution, forged
 * and stale deliveries refused, a subscription already removed on crm-relay's side, what n8n answers
 * once a workflow is gone, and the action node's preview records.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Webhook } from "standardwebhooks"
import contract from "../nodes/CrmRelay/shared/contract.json" with { type: "json" }
import { screenshotWorkflow } from "./support/Editor.mjs"
import { Harness, layer as harness } from "./support/Harness.mjs"
import { until } from "./support/Until.mjs"
import { recentRecordsWorkflow, triggerWorkflow } from "./support/Workflows.mjs"

interface Subscription {
  readonly id: string
  readonly event: string
  readonly target: string
}

interface Execution {
  readonly id: string
  readonly status: string
  readonly mode: string
  readonly data?: { readonly resultData: { readonly runData: Record<string, Array<{ data: { main: Array<Array<{ json: Record<string, unknown> }>> } }>> } }
}

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
  tenant_id: "tenant-n8n",
  classification,
  source: "AI receptionist (phone)",
  tags: ["inbound"],
  caller,
  lead: { job_type: "Water heater repair", summary: "No hot water since this morning.", notes: "", urgency: "today" },
  ...extra
})

const booking = {
  status: "booked",
  appointment_external_id: "crm-appt-7731",
  start: "2026-03-02T09:00:00-06:00",
  end: "2026-03-02T10:00:00-06:00",
  timezone: "America/Chicago",
  slot_text: "Monday at 9 am",
  title: "Water heater repair – Whitfield",
  notes: "",
  address: "42 Elm Street, Springfield",
  job_type: "Water heater repair"
}

const leafPaths = (value: unknown, prefix: ReadonlyArray<string> = []): Array<string> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.entries(value).flatMap(([key, child]) => leafPaths(child, [...prefix, key]))
    : [prefix.join(".")]

// The subscriptions of the harness's account, or of `accountId`.
const subscriptions = (accountId?: string) =>
  Effect.gen(function*() {
    const { crm } = yield* Harness
    const answer = yield* crm.admin("GET", `/v1/accounts/${accountId ?? crm.accountId}/subscriptions`)
    expect(answer.status, answer.text).toBe(200)
    return (answer.json as { subscriptions: Array<Subscription> }).subscriptions
  })

const subscriptionTo = (target: string, accountId?: string) =>
  until(`a subscription to ${target}`, Effect.map(subscriptions(accountId), (all) => Option.fromNullable(all.find((s) => s.target === target))))

const noSubscriptionTo = (target: string, accountId?: string) =>
  until(`the removal of the subscription to ${target}`, Effect.map(subscriptions(accountId), (all) => (all.some((s) => s.target === target) ? Option.none() : Option.some(true))))

const api = (method: string, path: string, body?: unknown) =>
  Effect.flatMap(Harness, ({ n8n }) => Effect.orDie(n8n.api(method, path, body)))

const created = (method: string, path: string, body?: unknown) =>
  Effect.gen(function*() {
    const answer = yield* api(method, path, body)
    expect(answer.status, answer.text).toBe(200)
    return answer.json as { id: string; active?: boolean }
  })

const credentialFor = (data: Record<string, string>) => created("POST", "/credentials", { name: "crm-relay", type: "crmRelayApi", data })

const testCredential = (id: string) =>
  Effect.map(api("POST", `/credentials/${id}/test`), (answer) => answer.json as { status: string; message: string })

const executions = (workflowId: string) =>
  Effect.map(api("GET", `/executions?workflowId=${workflowId}&includeData=true&limit=50`), (answer) => (answer.json as { data: Array<Execution> }).data)

const postOutcome = (callId: string, body: unknown) =>
  Effect.gen(function*() {
    const answer = yield* (yield* Harness).crm.admin("POST", `/v1/calls/${callId}/outcome`, body)
    expect(answer.status, answer.text).toBe(202)
    return answer.json as { route: string; deliveries?: number }
  })

const itemOf = (execution: Execution, node: string) => execution.data?.resultData.runData[node]?.[0]?.data.main[0]?.[0]?.json

layer(harness, { excludeTestServices: true, timeout: 900_000 })("n8n-nodes-crm-relay in a real n8n against crm-relay serve", (it) => {
  it.effect("the credential's test is GET /perform-list: it passes with a live key; a refused key shows the contract's sentence; an unreachable URL, plain http, and keys of the wrong form each get one sentence and send nothing", () =>
    Effect.gen(function*() {
      const { crm } = yield* Harness
      const good = yield* credentialFor({ baseUrl: `${crm.publicUrl}/`, apiKey: ` ${crm.key} `, signingSecret: crm.signingSecret })
      expect(yield* testCredential(good.id)).toEqual({ status: "OK", message: "Connection tested: crm-relay accepted the integration key." })

      const cases: Array<readonly [Record<string, string>, string]> = [
        // "A 401 shows the contract's message."
        [{ baseUrl: crm.publicUrl, apiKey: `crk_${"A".repeat(43)}` }, `crm-relay refused the integration key (401): ${contract.unauthorized}`],
        // "An unreachable URL says so in one sentence."
        [{ baseUrl: "http://127.0.0.1:9", apiKey: crm.key }, "Could not reach the crm-relay Event API at http://127.0.0.1:9: the connection was refused."],
        // "a base URL that is not HTTPS (except loopback for development)"
        [{ baseUrl: "http://events.example.com", apiKey: crm.key }, "The Event API base URL must start with https:// (got http://events.example.com)"],
        [{ baseUrl: "events.example.com", apiKey: crm.key }, "is not a URL"],
        // "a key of the wrong form"
        [{ baseUrl: crm.publicUrl, apiKey: `Bearer ${crm.key}` }, 'Enter the integration key alone, without "Bearer "'],
        [{ baseUrl: crm.publicUrl, apiKey: randomUUID() }, "This is the id of an integration key, not the key itself"],
        [{ baseUrl: crm.publicUrl, apiKey: crm.key.slice(0, -3) }, "This is not a crm-relay integration key"],
        [{ baseUrl: crm.publicUrl, apiKey: crm.key, signingSecret: "not-a-secret" }, "The signing secret is not a crm-relay signing secret"]
      ]
      for (const [data, sentence] of cases) {
        const tested = yield* testCredential((yield* credentialFor(data)).id)
        expect(tested.status, JSON.stringify(data)).toBe("Error")
        expect(tested.message).toContain(sentence)
        expect(tested.message).not.toMatch(/\n\s+at /)
      }
    }))

  it.effect("the trigger: activating subscribes n8n's production webhook URL; a real call outcome arrives as an execution carrying the lead's fields; forged and stale deliveries get 401 and start nothing; deactivating removes the subscription", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key, signingSecret: crm.signingSecret })
      const webhookId = randomUUID()
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "lead", webhookId, name: "New leads from crm-relay" }))
      yield* created("POST", `/workflows/${workflow.id}/activate`)

      // "crm-relay lists a subscription whose target is n8n's webhook URL"
      const target = `${n8n.url}/webhook/${webhookId}/webhook`
      const subscription = yield* subscriptionTo(target)
      expect(subscription.event).toBe("lead")

      // "an outcome posted to crm-relay arrives as an n8n execution whose data carries the lead's fields"
      const callId = `call-n8n-lead-${randomUUID()}`
      expect(yield* postOutcome(callId, outcome(crm.accountId, "lead"))).toMatchObject({ route: "event", deliveries: 1 })
      const execution = yield* until("the execution of the delivered lead", Effect.map(executions(workflow.id), (all) => Option.fromNullable(all.find((e) => e.status === "success"))))
      const item = itemOf(execution, "CRM Relay Trigger")
      expect(item).toMatchObject({
        event: "lead",
        call_id: callId,
        source: "AI receptionist (phone)",
        contact: { full_name: "Dana Whitfield", phones: ["+15551234567"], emails: ["dana@example.com"], postal_code: "62704" },
        job_type: "Water heater repair",
        booked: false
      })
      // One item with the event's fields: the same fields the Zapier app's outputFields list.
      expect(leafPaths(item).sort()).toEqual(contract.lead.fields.map((f) => f.path).sort())
      expect(itemOf(execution, "Take the lead")).toEqual(item)

      // "a delivery with a forged signature starts no execution" (nor a stale one, correctly signed).
      const body = JSON.stringify({ ...item, id: randomUUID(), call_id: `call-n8n-forged-${randomUUID()}` })
      const sign = (secret: string, at: Date) => {
        const id = `msg_${randomUUID()}`
        return { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": new Webhook(secret).sign(id, at, body) }
      }
      const before = (yield* executions(workflow.id)).length
      const forged = yield* Effect.orDie(n8n.post(target, body, sign(`whsec_${Buffer.from(randomUUID()).toString("base64")}`, new Date())))
      expect(forged.status, forged.text).toBe(401)
      expect(forged.json).toEqual({ error: "The delivery's webhook-signature does not match the signing secret. The delivery was not accepted." })
      const stale = yield* Effect.orDie(n8n.post(target, body, sign(crm.signingSecret, new Date(Date.now() - 10 * 60_000))))
      expect(stale.status, stale.text).toBe(401)
      expect(String((stale.json as { error: string }).error)).toContain("webhook-timestamp is more than 300 s from now")
      const unsigned = yield* Effect.orDie(n8n.post(target, body, { "content-type": "application/json" }))
      expect(unsigned.status).toBe(401)
      expect((yield* executions(workflow.id)).length).toBe(before)

      // "deactivating the workflow removes the subscription"
      yield* created("POST", `/workflows/${workflow.id}/deactivate`)
      yield* noSubscriptionTo(target)
      expect(yield* postOutcome(`call-n8n-off-${randomUUID()}`, outcome(crm.accountId, "lead"))).toMatchObject({ route: "event", deliveries: 0 })
    }))

  it.effect("listen for test event with records in GET /perform-list: the newest lead arrives at once as the test event, shaped as a delivery, with no call outcome posted; the test subscription is then removed; activating never sends a sample", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      // Signed with the account's signing secret, the sample passes the same check as a delivery.
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key, signingSecret: crm.signingSecret })
      const previewList = Effect.map(
        Effect.orDie(n8n.get(`${crm.publicUrl}/perform-list?limit=${contract.preview.limitMax}`, { authorization: `Bearer ${crm.key}` })),
        (answer) => answer.json as Array<{ id: string; call_id: string; source: string; contact: { external_id: string }; job_type: string; summary: string; booked: boolean }>
      )
      const before = yield* previewList
      // The earlier test delivered a lead: the preview's newest unbooked record is the sample to come.
      const newest = before.find((r) => !r.booked && r.id !== contract.preview.syntheticId)
      expect(newest).toBeDefined()

      const webhookId = randomUUID()
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "lead", webhookId, name: "Trying the trigger on a busy account" }))
      // "The editor's 'listen for test event' uses the test webhook URL, and the sample data comes from perform-list."
      const run = yield* n8n.rest("POST", `/workflows/${workflow.id}/run`, { triggerToStartFrom: { name: "CRM Relay Trigger" } })
      expect(run.status, run.text).toBe(200)
      expect(run.json).toEqual({ data: { waitingForWebhook: true } })
      const execution = yield* until("the manual execution of the sample", Effect.map(executions(workflow.id), (all) => Option.fromNullable(all.find((e) => e.status === "success"))), { within: "3 minutes" })
      expect(execution.mode).toBe("manual")
      const item = itemOf(execution, "CRM Relay Trigger") as Record<string, unknown> & { contact: Record<string, unknown> }
      // The record's values, in the shape of a real delivery's item: every field of a lead delivery,
      // those a preview does not carry (names, phones, emails, created_at) empty rather than invented.
      expect(item).toMatchObject({ ...newest, contact: { ...newest?.contact }, event: "lead", booked: false })
      expect(leafPaths(item).sort()).toEqual(contract.lead.fields.map((f) => f.path).sort())
      expect(item.contact).toMatchObject({ full_name: "", phones: [], emails: [] })
      expect(itemOf(execution, "Take the lead")).toEqual(item)
      // n8n takes one test event, then removes its test webhook: the node unsubscribes the test URL.
      yield* noSubscriptionTo(`${n8n.url}/webhook-test/${webhookId}/webhook`)
      expect((yield* executions(workflow.id)).length).toBe(1)
      // No call outcome was posted during the listen: the account's preview is what it was.
      expect(yield* previewList).toEqual(before)

      // Never in production: activating subscribes the production URL and sends no sample; only a real event runs.
      yield* created("POST", `/workflows/${workflow.id}/activate`)
      const target = `${n8n.url}/webhook/${webhookId}/webhook`
      yield* subscriptionTo(target)
      const callId = `call-n8n-after-sample-${randomUUID()}`
      expect(yield* postOutcome(callId, outcome(crm.accountId, "lead"))).toMatchObject({ route: "event", deliveries: 1 })
      yield* until("the production execution of the delivered lead", Effect.map(executions(workflow.id), (all) => Option.fromNullable(all.find((e) => e.mode !== "manual" && e.status === "success"))))
      const production = (yield* executions(workflow.id)).filter((e) => e.mode !== "manual")
      expect(production.map((e) => itemOf(e, "CRM Relay Trigger")?.["call_id"])).toEqual([callId])
      yield* created("POST", `/workflows/${workflow.id}/deactivate`)
      yield* noSubscriptionTo(target)
    }).pipe(Effect.tapDefect(() => Effect.flatMap(Harness, ({ n8n }) => Effect.sync(() => console.error(`n8n said:\n${n8n.lines(/crm-relay|sample|perform-list|CRM Relay|webhook/i)}`))))))

  it.effect("listen for test event with no record of the kind in GET /perform-list (its synthetic example only): the test URL is subscribed and waits; the first real event runs the workflow once and the test subscription is removed", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const fresh = yield* crm.newAccount("n8n account without deliveries")
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: fresh.key, signingSecret: fresh.signingSecret })
      const webhookId = randomUUID()
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "lead", webhookId, name: "Trying the trigger on a new account" }))
      // What the editor's "Execute workflow" (listen for test event) sends.
      const run = yield* n8n.rest("POST", `/workflows/${workflow.id}/run`, { triggerToStartFrom: { name: "CRM Relay Trigger" } })
      expect(run.status, run.text).toBe(200)
      expect(run.json).toEqual({ data: { waitingForWebhook: true } })
      const testTarget = `${n8n.url}/webhook-test/${webhookId}/webhook`
      expect((yield* subscriptionTo(testTarget, fresh.accountId)).event).toBe("lead")
      // The node has read perform-list and found nothing to send: only then is a real event made.
      yield* until("the node's reading of an empty preview", Effect.sync(() => (n8n.printed("perform-list holds no lead yet") ? Option.some(true) : Option.none())), { within: "3 minutes" })

      const callId = `call-n8n-test-event-${randomUUID()}`
      expect(yield* postOutcome(callId, outcome(fresh.accountId, "lead"))).toMatchObject({ route: "event", deliveries: 1 })
      const execution = yield* until("the manual execution of the test event", Effect.map(executions(workflow.id), (all) => Option.fromNullable(all.find((e) => e.status === "success"))))
      expect(execution.mode).toBe("manual")
      // The real delivery, names and all.
      expect(itemOf(execution, "CRM Relay Trigger")).toMatchObject({ event: "lead", call_id: callId, contact: { full_name: "Dana Whitfield" } })
      // n8n takes one test event, then removes its test webhook: the node unsubscribes it.
      yield* noSubscriptionTo(testTarget, fresh.accountId)
    }).pipe(Effect.tapDefect(() => Effect.flatMap(Harness, ({ n8n }) => Effect.sync(() => console.error(`n8n said:\n${n8n.lines(/crm-relay|sample|perform-list|CRM Relay|webhook/i)}`))))))

  it.effect("a subscription removed on crm-relay's side: deactivating takes the 404 as already gone, and activating again subscribes anew", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key, signingSecret: crm.signingSecret })
      const webhookId = randomUUID()
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "booking", webhookId, name: "New bookings from crm-relay" }))
      yield* created("POST", `/workflows/${workflow.id}/activate`)
      const target = `${n8n.url}/webhook/${webhookId}/webhook`
      const first = yield* subscriptionTo(target)
      expect(first.event).toBe("booking")

      // Removed in the Integrations area (or by the operator) while the workflow is active.
      expect((yield* crm.admin("DELETE", `/v1/accounts/${crm.accountId}/subscriptions/${first.id}`)).status).toBe(204)
      yield* noSubscriptionTo(target)
      yield* created("POST", `/workflows/${workflow.id}/deactivate`)
      // The node's delete got 404 and counted it as gone: its static data no longer holds the id, so
      // activating again subscribes anew (checkExists answers false) rather than trusting a dead id.
      yield* created("POST", `/workflows/${workflow.id}/activate`)
      const second = yield* subscriptionTo(target)
      expect(second.id).not.toBe(first.id)

      // A booked call arrives on the new subscription.
      const callId = `call-n8n-booking-${randomUUID()}`
      expect(yield* postOutcome(callId, outcome(crm.accountId, "booking", { booking }))).toMatchObject({ route: "event", deliveries: 1 })
      const execution = yield* until("the execution of the delivered booking", Effect.map(executions(workflow.id), (all) => Option.fromNullable(all.find((e) => e.status === "success"))))
      const item = itemOf(execution, "CRM Relay Trigger")
      expect(item).toMatchObject({ event: "booking", call_id: callId, booked: true, appointment: { external_id: "crm-appt-7731", status: "scheduled" } })
      expect(leafPaths(item).sort()).toEqual(contract.booking.fields.map((f) => f.path).sort())

      yield* created("POST", `/workflows/${workflow.id}/deactivate`)
      yield* noSubscriptionTo(target)
    }))

  it.effect("a workflow archived and deleted while active: n8n deactivates it first, so its subscription is removed; its URL then answers 404", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key })
      const webhookId = randomUUID()
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "lead", webhookId, name: "A workflow to delete" }))
      yield* created("POST", `/workflows/${workflow.id}/activate`)
      const target = `${n8n.url}/webhook/${webhookId}/webhook`
      yield* subscriptionTo(target)

      // Archiving unpublishes the workflow (in the background): the trigger's delete removes the subscription.
      const archived = yield* api("POST", `/workflows/${workflow.id}/archive`)
      expect(archived.status, archived.text).toBe(200)
      yield* noSubscriptionTo(target)
      // Only then may it be deleted (n8n answers 409 "still being unpublished" until it is done).
      const deleted = yield* until("the deletion of the archived workflow", Effect.map(api("DELETE", `/workflows/${workflow.id}`), (answer) => (answer.status === 409 ? Option.none() : Option.some(answer))))
      expect(deleted.status, deleted.text).toBe(200)

      // What n8n answers for a webhook path it no longer knows: 404, not 410.
      const gone = yield* Effect.orDie(n8n.post(target, "{}", { "content-type": "application/json" }))
      expect(gone.status).toBe(404)
      expect(String((gone.json as { message: string }).message)).toContain("is not registered")
    }))

  it.effect("the action node: Get recent records returns the preview records of GET /perform-list, Max Records as its limit; Only Booked keeps the booked ones; a plain-http base URL fails the execution with its sentence", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key })
      const path = `recent-${randomUUID()}`
      const workflow = yield* created("POST", "/workflows", recentRecordsWorkflow({ credentialId: credential.id, path }))
      yield* created("POST", `/workflows/${workflow.id}/activate`)
      const run = (query: string) =>
        until(`an answer of the recent-records workflow (${query})`, Effect.map(Effect.orDie(n8n.get(`${n8n.url}/webhook/${path}?${query}`)), (answer) => (answer.status === 404 ? Option.none() : Option.some(answer))))

      const preview = yield* Effect.orDie(n8n.get(`${crm.publicUrl}/perform-list?limit=5`, { authorization: `Bearer ${crm.key}` }))
      expect(preview.status).toBe(200)
      const records = preview.json as Array<{ booked: boolean }>
      // The earlier tests delivered a lead and a booking, at least.
      expect(records.some((r) => r.booked)).toBe(true)
      expect(records.some((r) => !r.booked)).toBe(true)

      const all = yield* run("max=5")
      expect(all.status, all.text).toBe(200)
      expect(all.json).toEqual(records)
      const booked = yield* run("max=5&onlyBooked=true")
      expect(booked.json).toEqual(records.filter((r) => r.booked))
      const two = yield* run("max=2")
      expect(two.json).toEqual(records.slice(0, 2))

      // Bad input in a node: the execution fails with the credential check's sentence, not a stack trace.
      const plain = yield* credentialFor({ baseUrl: "http://events.example.com", apiKey: crm.key })
      const badPath = `recent-bad-${randomUUID()}`
      const bad = yield* created("POST", "/workflows", recentRecordsWorkflow({ credentialId: plain.id, path: badPath }))
      yield* created("POST", `/workflows/${bad.id}/activate`)
      yield* until("an answer of the misconfigured workflow", Effect.map(Effect.orDie(n8n.get(`${n8n.url}/webhook/${badPath}?max=3`)), (answer) => (answer.status === 404 ? Option.none() : Option.some(answer))))
      const failed = yield* until("the failed execution", Effect.map(api("GET", `/executions?workflowId=${bad.id}&includeData=true&status=error`), (answer) => Option.fromNullable((answer.json as { data: Array<{ data?: { resultData: { error?: { message: string } } } }> }).data[0])))
      expect(failed.data?.resultData.error?.message).toContain("The Event API base URL must start with https:// (got http://events.example.com)")
    }))

  it.effect("the workflow in n8n's editor, in chromium: the trigger and what follows it on the canvas (the screenshot in docs/n8n/workflow.png)", () =>
    Effect.gen(function*() {
      const { crm, n8n } = yield* Harness
      const credential = yield* credentialFor({ baseUrl: crm.publicUrl, apiKey: crm.key, signingSecret: crm.signingSecret })
      const workflow = yield* created("POST", "/workflows", triggerWorkflow({ credentialId: credential.id, event: "lead", webhookId: randomUUID(), name: "New leads from crm-relay" }))
      // Into the test output on every run; into the docs when asked (UPDATE_SCREENSHOTS=1), so a run leaves the tree as it was.
      const file = Path.join(import.meta.dirname, "..", "test-output", "workflow.png")
      const shown = yield* screenshotWorkflow({ url: n8n.url, workflowId: workflow.id, file })
      expect(shown.join("\n")).toContain("CRM Relay Trigger")
      expect(shown.join("\n")).toContain("New Lead")
      expect(shown.join("\n")).toContain("Take the lead")
      expect(Fs.readFileSync(file).subarray(1, 4).toString()).toBe("PNG")
      if (process.env["UPDATE_SCREENSHOTS"] === "1") Fs.copyFileSync(file, Path.join(import.meta.dirname, "..", "..", "..", "docs", "n8n", "workflow.png"))
    }))
})
