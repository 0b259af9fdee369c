/**
 * Event destinations in the Integrations area (issue 34, "Where they are
 * managed"), in a real browser against a real server and a real RabbitMQ and
 * NATS server of the test's own on loopback: a person creates a RabbitMQ and
 * a NATS JetStream destination in the page (each checked first), sends each
 * a test event and the test reads that message from the broker, its message
 * id the delivery's `webhook-id`; a wrong password or a missing stream shows
 * the check's sentence and nothing is stored; a test event while the broker
 * is away shows why it was not delivered; disable, enable and remove work. Each state is scanned with axe-core and photographed.
 */
import { expect, layer } from "@effect/vitest"
import { Eventually, NatsServer, RabbitMqServer } from "@crm-relay/testing"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as amqp from "amqplib"
import { Context, Effect, Layer } from "effect"
import type { Locator, Page } from "playwright-core"
import { screenshot } from "./support/Browser.js"
import { noSeriousViolations, promise, signedIn, WAIT } from "./support/SignedIn.js"
import { admin } from "./support/Stack.js"
import * as Stack from "./support/Stack.js"

/** The test's own brokers (started once for the file, stopped with it). */
class Brokers extends Context.Tag("@crm-relay/portal/test/Brokers")<Brokers, {
  readonly rabbit: RabbitMqServer.RabbitMqServer
  readonly nats: NatsServer.NatsServer
}>() {}

const BrokersLive = Layer.scoped(
  Brokers,
  Effect.all({ rabbit: Effect.orDie(RabbitMqServer.start), nats: Effect.orDie(NatsServer.start) }, { concurrency: 2 })
)

/** A durable direct exchange `name` with a durable queue `name` bound to it by `routingKey`. */
const exchangeWithQueue = (rabbit: RabbitMqServer.RabbitMqServer, name: string, routingKey: string) =>
  promise(async () => {
    const connection = await amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })
    const channel = await connection.createChannel()
    await channel.assertExchange(name, "direct", { durable: true })
    await channel.assertQueue(name, { durable: true })
    await channel.bindQueue(name, name, routingKey)
    await connection.close()
  })

/** The next message in `queue`, waiting for it (the broker confirmed it before the page said so, but it is read on a condition anyway). */
const takeOne = (rabbit: RabbitMqServer.RabbitMqServer, queue: string) =>
  Effect.acquireUseRelease(
    promise(() => amqp.connect({ hostname: "127.0.0.1", port: rabbit.port, username: rabbit.user, password: rabbit.password })),
    (connection) =>
      Effect.gen(function*() {
        const channel = yield* promise(() => connection.createChannel())
        const taken: { message?: amqp.GetMessage } = {}
        yield* Eventually.eventually(
          promise(async () => {
            const got = await channel.get(queue, { noAck: true })
            if (got !== false) taken.message = got
            return got !== false
          }),
          WAIT.timeout
        )
        const message = taken.message!
        return {
          messageId: String(message.properties.messageId),
          webhookId: String(message.properties.headers?.["webhook-id"] ?? ""),
          signature: String(message.properties.headers?.["webhook-signature"] ?? ""),
          body: message.content.toString("utf8")
        }
      }),
    (connection) => promise(() => connection.close())
  )

/** The account's deliveries, latest first, as the operator lists them (the tests post no lead: each is a test event). */
const deliveries = (accountId: string) =>
  Effect.map(
    admin("GET", `/v1/accounts/${accountId}/deliveries?limit=100`),
    (answer) => (answer.json as { deliveries: ReadonlyArray<{ id: string; status: string }> }).deliveries
  )

/** The account's destinations, as the operator lists them. */
const stored = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/destinations`), (answer) => (answer.json as { items: ReadonlyArray<unknown> }).items)

/** Fills `label` of the destination form (exact: "Name" is not "User name"). */
const fill = (form: Locator, label: string, value: string) => promise(() => form.getByLabel(label, { exact: true }).fill(value))

/** The row of the destination named `name`, once listed. */
const rowOf = (page: Page, name: string) =>
  Effect.gen(function*() {
    const row = page.getByTestId("destination-row").filter({ hasText: name })
    yield* promise(() => row.waitFor(WAIT))
    return row
  })

/** Sends a test event from `row`, waits for the page to show the broker's confirmation, and answers the test delivery's id. */
const sendTest = (row: Locator, accountId: string, before: number) =>
  Effect.gen(function*() {
    yield* promise(() => row.getByRole("button", { name: "Send test event" }).click())
    yield* promise(() => row.getByTestId("test-result").getByText(/^Test event delivered: the broker confirmed it in \d+ ms\.$/).waitFor(WAIT))
    const sent = yield* deliveries(accountId)
    expect(sent).toHaveLength(before + 1)
    expect(sent[0]!.status).toBe("delivered")
    return sent[0]!.id
  })

// The brokers outlive the server: its kept broker connections close first, as in production.
layer(Stack.Live.pipe(Layer.provideMerge(BrokersLive)), { timeout: 600_000, excludeTestServices: true })("Event destinations in the Integrations area", (it) => {
  it.scoped("RabbitMQ: a wrong password shows the check's sentence (\"wrong credentials\") and nothing is stored; with the right one it is created, a test event reaches the bound queue with message id = webhook-id; disable, enable and remove work", () =>
    Effect.gen(function*() {
      const { rabbit } = yield* Brokers
      const { account, errors, page } = yield* signedIn()
      const card = page.locator("[data-card=destinations]")
      yield* promise(() => card.getByTestId("destinations-empty").waitFor(WAIT))
      yield* exchangeWithQueue(rabbit, "crm-events", "crm.lead")

      const form = page.getByTestId("destination-form")
      yield* promise(() => form.getByLabel("Kind").selectOption("rabbitmq"))
      yield* fill(form, "Name", "Our lead queue")
      yield* fill(form, "RabbitMQ URL", rabbit.url)
      yield* fill(form, "Exchange", "crm-events")
      yield* fill(form, "Routing key", "crm.lead")
      yield* fill(form, "User name", rabbit.user)
      yield* fill(form, "Password", "not-the-password")
      yield* promise(() => form.getByRole("button", { name: "Check and create" }).click())
      const refusal = form.getByRole("alert")
      yield* promise(() => refusal.waitFor(WAIT))
      expect(yield* promise(() => refusal.textContent())).toMatch(
        /^Not created: The RabbitMQ broker at 127\.0\.0\.1:\d+ refused the user .+ \(wrong user name or password\)\. Check the user name and password \(or the token\) the broker expects; then create it again\.$/
      )
      // The password is never kept in the form, nor stored anywhere: nothing was created.
      expect(yield* promise(() => form.getByLabel("Password", { exact: true }).inputValue())).toBe("")
      expect(yield* stored(account.id)).toEqual([])
      yield* noSeriousViolations(page, "[data-card=destinations]")
      yield* promise(() => screenshot(page, "[data-card=destinations]", "destination-refused"))

      yield* fill(form, "Password", rabbit.password)
      yield* promise(() => form.getByRole("button", { name: "Check and create" }).click())
      yield* promise(() => card.getByText("Our lead queue created: the check passed.", { exact: false }).waitFor(WAIT))
      const row = yield* rowOf(page, "Our lead queue")
      const shown = (yield* promise(() => row.textContent())) ?? ""
      expect(shown).toContain(rabbit.url)
      expect(shown).toContain("exchange crm-events, routing key \"crm.lead\"")
      expect(shown).toContain("credentials set (never shown again)")
      expect(shown).not.toContain(rabbit.password)
      expect(yield* promise(() => row.getByTestId("destination-state").textContent())).toBe("active")

      const id = yield* sendTest(row, account.id, 0)
      const message = yield* takeOne(rabbit, "crm-events")
      expect(message).toMatchObject({ messageId: id, webhookId: id, signature: expect.stringMatching(/^v1,/) })
      expect(JSON.parse(message.body)).toMatchObject({ event: "lead", source: "Test event from the Integrations area" })
      // Its latest deliveries, one click away: the test event, delivered.
      yield* promise(() => row.getByText("Latest deliveries (1)").click())
      yield* promise(() => row.getByTestId("recent-delivery").filter({ hasText: "delivered" }).filter({ hasText: "test" }).waitFor(WAIT))
      yield* noSeriousViolations(page, "[data-card=destinations]")
      yield* promise(() => screenshot(page, "[data-card=destinations]", "destinations"))

      yield* promise(() => row.getByRole("button", { name: "Disable", exact: true }).click())
      yield* promise(() => card.getByText("Our lead queue disabled: no events are sent to it until you enable it.").waitFor(WAIT))
      const state = row.getByTestId("destination-state")
      yield* promise(() => state.filter({ hasText: /disabled since .*: Disabled in the Integrations area\. No new events are sent to it until you enable it\./ }).waitFor(WAIT))
      expect(yield* stored(account.id)).toMatchObject([{ state: "disabled", disabled_reason: "Disabled in the Integrations area." }])
      yield* noSeriousViolations(page, "[data-card=destinations]")

      yield* promise(() => row.getByRole("button", { name: "Enable", exact: true }).click())
      yield* promise(() => card.getByText("Our lead queue enabled: new events are sent to it again.").waitFor(WAIT))
      yield* promise(() => state.filter({ hasText: /^active$/ }).waitFor(WAIT))
      expect(yield* stored(account.id)).toMatchObject([{ state: "active" }])

      // The broker away: the test event's outcome says why, and that it will be retried on the schedule.
      yield* rabbit.stop
      yield* promise(() => row.getByRole("button", { name: "Send test event" }).click())
      yield* promise(() => row.getByTestId("test-result").filter({ hasText: /^Test event not delivered: .+\. It will be retried\.$/ }).waitFor(WAIT))
      yield* noSeriousViolations(page, "[data-card=destinations]")
      yield* promise(() => screenshot(page, "[data-testid=destination-row]", "destination-test-failed"))
      yield* Effect.orDie(rabbit.start)

      yield* promise(() => row.getByRole("button", { name: "Remove destination Our lead queue" }).click())
      yield* promise(() => row.getByRole("button", { name: "Remove it" }).click())
      yield* promise(() => card.getByText("Our lead queue removed: nothing more is sent to it.").waitFor(WAIT))
      yield* promise(() => card.getByTestId("destinations-empty").waitFor(WAIT))
      expect(yield* stored(account.id)).toEqual([])
      expect(errors).toEqual([])
    }))

  it.scoped("NATS JetStream: a stream that does not exist shows the check's sentence and nothing is stored; with the stream there it is created, and a test event is in the stream with Nats-Msg-Id = webhook-id", () =>
    Effect.gen(function*() {
      const { nats } = yield* Brokers
      const { account, errors, page } = yield* signedIn()
      const form = page.getByTestId("destination-form")
      yield* promise(() => form.getByLabel("Kind").selectOption("nats"))
      // Only the chosen kind's fields: NATS has a subject and a stream, no exchange.
      expect(yield* promise(() => form.getByLabel("Exchange", { exact: true }).count())).toBe(0)
      yield* fill(form, "Name", "Our stream")
      yield* fill(form, "NATS URL", nats.url)
      yield* fill(form, "Subject", "crm.leads")
      yield* fill(form, "Stream (optional)", "CRM")
      yield* fill(form, "User name", nats.user)
      yield* fill(form, "Password", nats.password)
      yield* promise(() => form.getByRole("button", { name: "Check and create" }).click())
      const refusal = form.getByRole("alert")
      yield* promise(() => refusal.waitFor(WAIT))
      expect(yield* promise(() => refusal.textContent())).toMatch(
        /^Not created: No JetStream stream on the NATS server at 127\.0\.0\.1:\d+ captures the subject crm\.leads\. Create the exchange or stream on the broker first, or correct its name; then create it again\.$/
      )
      expect(yield* stored(account.id)).toEqual([])

      const connection = yield* Effect.acquireRelease(
        promise(() => connect({ servers: `127.0.0.1:${nats.port}`, user: nats.user, pass: nats.password })),
        (c) => promise(() => c.close().catch(() => {}))
      )
      const jsm = yield* promise(() => jetstreamManager(connection))
      yield* promise(() => jsm.streams.add({ name: "CRM", subjects: ["crm.>"] }))
      yield* fill(form, "Password", nats.password)
      yield* promise(() => form.getByRole("button", { name: "Check and create" }).click())
      const row = yield* rowOf(page, "Our stream")
      expect((yield* promise(() => row.textContent())) ?? "").toContain("subject crm.leads on stream CRM")

      const id = yield* sendTest(row, account.id, 0)
      const message = yield* promise(() => jsm.streams.getMessage("CRM", { last_by_subj: "crm.leads" }))
      expect(message?.header.get("Nats-Msg-Id")).toBe(id)
      expect(message?.header.get("webhook-id")).toBe(id)
      expect(message?.header.get("webhook-signature")).toMatch(/^v1,/)
      yield* noSeriousViolations(page, "[data-card=destinations]")
      yield* promise(() => screenshot(page, "[data-card=destinations]", "destination-nats"))
      expect(errors).toEqual([])
    }))
})
