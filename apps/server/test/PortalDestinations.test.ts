/**
 * Event destinations in the Integrations area's API: the session's account
 * only (another account's destination id answers 404, as an unknown one, and
 * changes nothing), and a form the kind refuses is a 400 with one sentence,
 * nothing stored. The brokers' checks, tests and refusals are driven through
 * the page in apps/portal's Destinations browser test.
 */
import { expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Effect, Layer, Option } from "effect"
import * as LogCapture from "./support/LogCapture.js"
import { session } from "./support/PortalSession.js"
import { layerServer } from "./support/TestServer.js"

/** The server's log lines, for the audit trail of the page's changes. */
const capture = LogCapture.make()

/** A server with its Integrations area on loopback (no built page: the API is what is tested). */
const Live = layerServer({
  portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.none() }
}).pipe(Layer.provide(capture.layer), Layer.provideMerge(TestDatabase.layer))

const UNKNOWN = "No destination with this id exists in this account; it may have been removed already."

/** A webhook destination: its check reads the URL only, so no receiver is needed to create one. */
const webhook = (name: string) => ({ kind: "webhook", name, event: "lead", config: { url: `https://hooks.example.com/${name}` } })

interface Listed {
  readonly destinations: ReadonlyArray<{ readonly id: string; readonly state: string; readonly name: string }>
}

layer(Live, { excludeTestServices: true })("event destinations in the Integrations area's API", (it) => {
  it.effect("Account boundary: \"the account comes from the portal session (never from the request)\" — another account's destination id answers 404 on show, disable, enable, test and remove, as a made-up one, and nothing of it changes", () =>
    Effect.gen(function*() {
      const theirs = yield* session()
      const mine = yield* session()
      const created = yield* theirs.call("POST", "/api/destinations", webhook("theirs"))
      expect(created.status).toBe(201)
      const destination = created.json as { id: string }
      expect(created.json).toMatchObject({
        kind: "webhook",
        name: "theirs",
        event: "lead",
        target: "https://hooks.example.com/theirs",
        state: "active",
        has_credentials: false,
        recent_deliveries: []
      })

      expect((yield* mine.call("GET", "/api/destinations")).json).toEqual({ destinations: [] })
      for (const id of [destination.id, "0f8fad5b-d9cb-469f-a165-70867728950e", "not-an-id"]) {
        for (const [method, path] of [
          ["GET", `/api/destinations/${id}`],
          ["POST", `/api/destinations/${id}/disable`],
          ["POST", `/api/destinations/${id}/enable`],
          ["POST", `/api/destinations/${id}/test`],
          ["DELETE", `/api/destinations/${id}`]
        ] as const) {
          const answer = yield* mine.call(method, path)
          expect([method, path, answer.status, answer.json]).toEqual([method, path, 404, { error: UNKNOWN }])
        }
      }

      // Theirs is untouched: still listed, active, and no test event was queued for it.
      const listed = (yield* theirs.call("GET", "/api/destinations")).json as Listed
      expect(listed.destinations.map((d) => [d.id, d.state])).toEqual([[destination.id, "active"]])
      expect((yield* theirs.call("GET", "/api/deliveries")).json).toMatchObject({ deliveries: [] })
    }))

  it.effect("Its own destination: shown, disabled (\"Disabled in the Integrations area.\"), enabled, sent a test event that its latest deliveries list, then removed; every change is an audit line naming the session", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const { id, subscription_id } = (yield* me.call("POST", "/api/destinations", webhook("mine"))).json as { id: string; subscription_id: string }
      expect((yield* me.call("POST", `/api/destinations/${id}/disable`)).json).toEqual({ id, outcome: "disabled" })
      expect((yield* me.call("GET", `/api/destinations/${id}`)).json).toMatchObject({
        state: "disabled",
        disabled_reason: "Disabled in the Integrations area."
      })
      expect((yield* me.call("POST", `/api/destinations/${id}/enable`)).json).toEqual({ id, outcome: "enabled" })
      const test = yield* me.call("POST", `/api/destinations/${id}/test`)
      expect(test.status).toBe(202)
      const { delivery_id } = test.json as { delivery_id: string }
      expect((yield* me.call("GET", `/api/destinations/${id}`)).json).toMatchObject({
        state: "active",
        recent_deliveries: [{ id: delivery_id, test: true, event: "lead" }]
      })
      expect((yield* me.call("DELETE", `/api/destinations/${id}`)).status).toBe(204)
      expect((yield* me.call("GET", "/api/destinations")).json).toEqual({ destinations: [] })
      expect((yield* me.call("GET", `/api/destinations/${id}`)).status).toBe(404)

      const mine = (line: Record<string, unknown>) => line["destination_id"] === id || line["subscription_id"] === subscription_id
      const changes = ["destination.created", "subscription.disabled", "subscription.enabled", "destination.removed"]
      const logged = Effect.map(LogCapture.ofKind(capture, "audit"), (lines) => lines.filter(mine))
      yield* Eventually.eventually(Effect.map(logged, (lines) => changes.every((action) => lines.some((line) => line["action"] === action))))
      const audit = yield* logged
      for (const line of audit) expect([line["action"], String(line["actor"])]).toEqual([line["action"], expect.stringMatching(/^portal_session:/)])
      expect(audit.find((line) => line["action"] === "subscription.disabled")).toMatchObject({
        account_id: me.accountId,
        reason: "Disabled in the Integrations area."
      })
    }))

  it.effect("Bad input: an unknown kind, a webhook URL of the wrong scheme, a RabbitMQ exchange name the broker would reject → 400 with one sentence, nothing stored", () =>
    Effect.gen(function*() {
      const me = yield* session()
      const answers = [
        yield* me.call("POST", "/api/destinations", { kind: "carrier_pigeon", name: "x", config: { url: "https://hooks.example.com/x" } }),
        yield* me.call("POST", "/api/destinations", { kind: "webhook", name: "x", config: { url: "http://hooks.example.com/x" } }),
        yield* me.call("POST", "/api/destinations", {
          kind: "rabbitmq",
          name: "x",
          config: { url: "amqps://broker.example.com", exchange: "no spaces allowed", routing_key: "lead" },
          credentials: { username: "u", password: "p" }
        })
      ]
      expect(answers.map((a) => a.status)).toEqual([400, 400, 400])
      expect((answers[0]!.json as { error: string }).error).toBe("The destination kind must be one of \"webhook\", \"rabbitmq\", \"nats\".")
      expect((answers[1]!.json as { error: string }).error).toBe("The webhook URL must start with https://.")
      // The field at fault and the broker's rule, not the Schema's name.
      expect((answers[2]!.json as { error: string }).error).toBe(
        "The rabbitmq destination's configuration is not valid: exchange must be 1 to 255 characters, each a letter, a digit, '-', '_', '.' or ':'."
      )
      expect((yield* me.call("GET", "/api/destinations")).json).toEqual({ destinations: [] })
    }))
})
