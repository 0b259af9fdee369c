/**
 * `npm run demo`: the whole path of a call, on loopback, in one command.
 *
 * Starts the reference bridge and a webhook receiver (both in this process,
 * HTTPS under one throwaway CA) and `crm-relay serve` (a child process on an
 * embedded database in a temporary DATA_DIR, free ports). Then, through the
 * internal API: creates an account, subscribes the receiver, connects a
 * tenant to the bridge, plays an in-call contact search and booking and a
 * post-call outcome, and waits for the CRM push and the signed delivery,
 * whose Standard Webhooks signature the receiver verifies with the
 * account's signing secret. Each hop is printed as it happens.
 *
 * Exit code 0 when every hop passed; 1 naming the hop that failed. Ctrl-C or
 * SIGTERM stops the server, the bridge and the receiver and removes the
 * temporary directory.
 */
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { Certificate, ServerProcess, WebhookReceiver } from "@crm-relay/testing"
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Console, Data, Effect, Option, Schedule } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Webhook } from "standardwebhooks"
import { type Json, jsonRequest } from "./http.js"

/** A hop of the demo failed; `hop` names it. */
class HopFailed extends Data.TaggedError("HopFailed")<{ readonly hop: string; readonly message: string }> {}

const TENANT = "demo-tenant"
const API_KEY = randomBytes(18).toString("base64url")
const CALL_ID = `demo-call-${randomUUID()}`

// Monday 3 March 2031 in New York: the reference bridge's calendar is open 09:00–17:00.
const WINDOW = {
  start: "2031-03-03T08:00:00-05:00",
  end: "2031-03-03T18:00:00-05:00",
  timezone: "America/New_York",
  windows: [],
  slot_minutes: 60,
  job_type: "Boiler repair"
}
const CALLER = {
  full_name: "Ada Lovelace",
  first_name: "Ada",
  last_name: "Lovelace",
  phones: ["+1 (555) 010-0042"],
  emails: ["ada@example.com"],
  address: "12 Analytical Row",
  postal_code: "02139"
}

const say = (line: string) => Console.log(line)
const detail = (line: string) => Console.log(`    ${line}`)

/** Runs `effect` as hop `name`: prints it, and turns any failure into HopFailed naming it. */
const hop = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
  Effect.zipRight(
    say(`\n▸ ${name}`),
    effect.pipe(
      Effect.mapError((error) =>
        new HopFailed({ hop: name, message: error instanceof Error ? error.message : String(error) })
      )
    )
  )

/** Retries `check` every 250 ms until it yields a value; a generous bound only guards against a hang. */
const waitFor = <A>(what: string, check: Effect.Effect<A | undefined, unknown>) =>
  Effect.flatMap(check, (value) => (value === undefined ? Effect.fail(new Error(`still waiting for ${what}`)) : Effect.succeed(value))).pipe(
    Effect.retry({ schedule: Schedule.spaced("250 millis"), while: (e) => e instanceof Error && e.message.startsWith("still waiting") }),
    Effect.timeoutFail({ duration: "120 seconds", onTimeout: () => new Error(`${what} did not happen within 120 s`) })
  )

const expectStatus = (answer: { readonly status: number; readonly json: Json }, status: number, what: string) =>
  answer.status === status
    ? Effect.succeed(answer.json)
    : Effect.fail(new Error(`${what} answered ${answer.status}: ${JSON.stringify(answer.json)}`))

const program = Effect.gen(function*() {
  yield* say("crm-relay demo: a call from in-call lookups to a signed webhook, everything on loopback.")

  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-demo-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const caFile = Path.join(dir, "demo-ca.pem")

  const { bridge, receiver } = yield* hop(
    "Start the reference bridge and the webhook receiver (HTTPS on 127.0.0.1, one throwaway CA)",
    Effect.gen(function*() {
      const ca = yield* Certificate.generateAuthority()
      Fs.writeFileSync(caFile, ca.cert)
      const bridgeCert = yield* Certificate.issue(ca)
      const bridge = yield* ReferenceBridge.make({
        tenants: [{ tenantId: TENANT, apiKey: API_KEY }],
        urlHost: "127.0.0.1",
        tls: { ca: ca.cert, ...bridgeCert }
      })
      const receiver = yield* WebhookReceiver.startReceiver(yield* Certificate.issue(ca))
      yield* detail(`bridge:   ${bridge.restBaseUrl} (tenant ${TENANT})`)
      yield* detail(`receiver: ${receiver.url}`)
      yield* detail(`CA:       ${caFile}`)
      return { bridge, receiver }
    })
  )

  const server = yield* hop(
    "Start crm-relay serve (embedded database in a temporary DATA_DIR, free ports)",
    Effect.gen(function*() {
      yield* detail("EGRESS_ALLOW_PRIVATE=127.0.0.1/32 lets egress reach the loopback bridge and receiver (never in production);")
      yield* detail(`NODE_EXTRA_CA_CERTS=${caFile} makes the server trust their certificates.`)
      const server = yield* ServerProcess.startServer({
        dataDir: Path.join(dir, "data"),
        env: { EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile }
      })
      yield* detail(`public Event API: ${server.publicUrl}   internal API: ${server.adminUrl}`)
      return server
    })
  )
  const admin = (method: string, path: string, body?: unknown) =>
    jsonRequest(method, `${server.adminUrl}${path}`, { token: server.adminToken, body })

  const account = yield* hop(
    "Create an account, an integration key, and subscribe the receiver (Event API POST /subscribe)",
    Effect.gen(function*() {
      const created = yield* expectStatus(yield* admin("POST", "/v1/accounts", { name: "Demo Plumbing", mode: "live" }), 201, "POST /v1/accounts")
      const id = String(created["id"])
      const key = yield* expectStatus(yield* admin("POST", `/v1/accounts/${id}/keys`), 201, "POST /v1/accounts/{id}/keys")
      const secret = yield* expectStatus(yield* admin("GET", `/v1/accounts/${id}/signing-secret`), 200, "GET /v1/accounts/{id}/signing-secret")
      const subscribed = yield* jsonRequest("POST", `${server.publicUrl}/subscribe`, {
        token: String(key["key"]),
        body: { targetUrl: receiver.url, event: "all" }
      })
      yield* expectStatus(subscribed, 201, "POST /subscribe")
      yield* detail(`account ${id}; subscription ${String(subscribed.json["id"])} → ${receiver.url}`)
      return { id, signingSecret: String(secret["secret"]) }
    })
  )
  receiver.trust(account.signingSecret)

  yield* hop(
    `Connect tenant ${TENANT} to the bridge (the capabilities check only)`,
    Effect.gen(function*() {
      const answer = yield* expectStatus(
        yield* admin("PUT", `/v1/accounts/${account.id}/connections/${TENANT}`, {
          transport: "rest",
          url: bridge.restBaseUrl,
          auth: { type: "api_key", key: API_KEY }
        }),
        200,
        "PUT /v1/accounts/{id}/connections/{tenantId}"
      )
      const capabilities = answer["capabilities"] as Json
      yield* detail(`bridge answered ${String(capabilities["contract_version"])}: ${(capabilities["operations"] as Array<string>).join(", ")}`)
    })
  )

  const inCall = (route: string, body: unknown) =>
    Effect.flatMap(admin("POST", `/v1/accounts/${account.id}/tenants/${TENANT}/${route}`, body), (answer) =>
      Effect.flatMap(expectStatus(answer, 200, `POST …/${route}`), (json) =>
        json["ok"] === true ? Effect.succeed(json) : Effect.fail(new Error(`${route} answered ${JSON.stringify(json)}`))))

  yield* hop(
    "In-call: search the caller, read availability, book the first free slot",
    Effect.gen(function*() {
      const found = yield* inCall("contacts/search", { phone: CALLER.phones[0], email: CALLER.emails[0] })
      yield* detail(`contacts.search → ${found["contact"] === null ? "no match" : JSON.stringify(found["contact"])}`)
      const upserted = yield* inCall("contacts/upsert", {
        contact: { ...CALLER, source: "Demo Receptionist (phone)", call_id: CALL_ID, tags: [] }
      })
      yield* detail(`contacts.upsert → contact ${String(upserted["id"])} (is_new ${String(upserted["is_new"])})`)
      const slots = (yield* inCall("availability", { window: WINDOW }))["slots"] as Array<Json>
      const slot = slots[0]
      if (slot === undefined) return yield* Effect.fail(new Error("availability.list offered no slot"))
      yield* detail(`availability.list → ${slots.length} slots, first ${String(slot["start"])}`)
      const booked = yield* inCall("appointments", {
        appointment: {
          contact_external_id: upserted["id"],
          timezone: WINDOW.timezone,
          start: slot["start"],
          end: slot["end"],
          slot_text: "Monday morning",
          job_type: WINDOW.job_type,
          address: CALLER.address,
          notes: "",
          title: "Boiler repair visit",
          source: "Demo Receptionist (phone)"
        }
      })
      yield* detail(`appointments.create → appointment ${String(booked["id"])}, confirmed ${String(booked["confirmed"])}`)
    })
  )

  yield* hop(
    `Post-call: POST /v1/calls/${CALL_ID}/outcome (a lead)`,
    Effect.gen(function*() {
      const accepted = yield* expectStatus(
        yield* admin("POST", `/v1/calls/${CALL_ID}/outcome`, {
          account_id: account.id,
          tenant_id: TENANT,
          classification: "lead",
          source: "Demo Receptionist (phone)",
          tags: ["demo"],
          caller: CALLER,
          lead: { job_type: WINDOW.job_type, summary: "No hot water since Monday; visit booked.", notes: "", urgency: "high" }
        }),
        202,
        "POST /v1/calls/{callId}/outcome"
      )
      yield* detail(`accepted: route ${String(accepted["route"])}`)
    })
  )

  yield* hop(
    "CRM push job: the worker writes the outcome to the bridge",
    Effect.gen(function*() {
      const push = yield* waitFor(
        "the push job to finish",
        Effect.map(admin("GET", `/v1/calls/${CALL_ID}/outcome`), (answer) => {
          const job = answer.json["push"] as Json | null | undefined
          return job !== null && job !== undefined && (job["status"] === "succeeded" || job["status"] === "failed") ? job : undefined
        })
      )
      yield* detail(`job ${String(push["id"])}: ${String(push["status"])} after ${String(push["attempts"])} attempt(s)`)
      if (push["status"] !== "succeeded") {
        return yield* Effect.fail(new Error(`the push job failed: ${JSON.stringify(push["error_message"] ?? push["error_class"])}`))
      }
      for (const step of (push["receipts"] as Array<Json> | undefined) ?? []) {
        yield* detail(`receipt ${String(step["operation"])}: ${JSON.stringify(step["receipt"])}`)
      }
      yield* say("  bridge receipts (what the bridge received, in order):")
      for (const request of yield* bridge.control.received) {
        yield* detail(
          `${request.operation ?? request.path} → ${String(request.status)}${
            request.idempotencyKey === undefined ? "" : ` (Idempotency-Key ${request.idempotencyKey})`
          }`
        )
      }
    })
  )

  yield* hop(
    "Webhook delivery: the lead event reaches the receiver, signature verified",
    Effect.gen(function*() {
      const delivery = yield* waitFor("a delivery at the receiver", Effect.sync(() => receiver.deliveries()[0]))
      if (!delivery.verified) return yield* Effect.fail(new Error(`the signature did not verify: ${delivery.problem}`))
      // Verified here again, with the secret the internal API gives, as a receiver would.
      const event = new Webhook(account.signingSecret).verify(delivery.body, delivery.headers) as Json
      yield* detail(`webhook-id ${delivery.headers["webhook-id"]}: signature verified with the account's signing secret`)
      yield* detail(`event ${String(event["event"])} for call ${String(event["call_id"])}, contact ${JSON.stringify(event["contact"])}`)
      const webhookId = delivery.headers["webhook-id"]
      const stored = yield* waitFor(
        "the delivery to be recorded as delivered",
        Effect.map(admin("GET", `/v1/accounts/${account.id}/deliveries`), (answer) =>
          ((answer.json["deliveries"] as Array<Json> | undefined) ?? []).find((d) => d["id"] === webhookId && d["status"] === "delivered"))
      )
      const last = stored["last_attempt"] as Json | null
      yield* detail(
        `GET /v1/accounts/{id}/deliveries: ${String(stored["id"])} ${String(stored["status"])} after ${String(stored["attempts"])} attempt(s)` +
          (last === null ? "" : `, the receiver answered ${String(last["status_code"])}`)
      )
    })
  )

  yield* say("\n✔ Every hop passed. Stopping the server, the bridge and the receiver.")
})

NodeRuntime.runMain(
  program.pipe(
    Effect.scoped,
    Effect.tapErrorCause((cause) =>
      Option.match(Cause.failureOption(cause), {
        onNone: () => Cause.isInterruptedOnly(cause) ? Console.error("\nInterrupted; stopped everything.") : Console.error(`\n✘ Demo failed: ${Cause.pretty(cause)}`),
        onSome: (error) => Console.error(`\n✘ Demo failed at hop "${error.hop}": ${error.message}`)
      })
    )
  ),
  { disableErrorReporting: true }
)
