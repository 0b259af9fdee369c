/**
 * A held delivery in the Integrations area (issue 40), in a real browser
 * against a real server and an HTTPS receiver on loopback that answers 503:
 * the Activity card shows the pending delivery held with the sentence, and
 * delivered once the receiver answers again. A file of its own: holding the
 * receiver's origin would hold every other test's hooks on it.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { screenshot } from "./support/Browser.js"
import { noSeriousViolations, promise, signedIn, WAIT } from "./support/SignedIn.js"
import { admin, TestReceiver } from "./support/Stack.js"
import * as Stack from "./support/Stack.js"

/** A lead outcome of `accountId` (no bridge connected: the event fans out at once). */
const lead = (accountId: string) =>
  Effect.map(
    admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, {
      account_id: accountId,
      tenant_id: Stack.TENANT.tenantId,
      classification: "lead",
      source: "Receptionist (phone)",
      tags: [],
      caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+1 555 0100"], emails: [], address: "" },
      lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "normal" }
    }),
    (answer) => expect(answer.status).toBe(202)
  )

const HELD = /^held: the receiver has been failing since (.+), next try at (.+)$/

layer(Stack.Live, { timeout: 600_000, excludeTestServices: true })("A held delivery in the Integrations area", (it) => {
  it.scoped("\"The listings, the CLI and the Integrations area say 'held: the receiver has been failing since …, next try at …'\": the Activity card shows the pending delivery held, then delivered once the receiver answers", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { account, errors, page } = yield* signedIn()
      const path = `/held/${Date.now()}`
      receiver.answer(path, 503)
      const target = receiver.url(path)
      yield* promise(() => page.getByLabel("Receiver URL").fill(target))
      yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
      yield* promise(() => page.getByTestId("hook-row").filter({ hasText: target }).waitFor(WAIT))

      // Three distinct deliveries failing with 503 hold the origin; the fourth waits with them.
      for (let i = 0; i < 4; i++) yield* lead(account.id)
      // The card refreshes itself every few seconds.
      const held = page.getByTestId("delivery-row").filter({ has: page.getByTestId("held") })
      yield* promise(() => held.nth(3).waitFor(WAIT))
      const sentence = (yield* promise(() => held.first().getByTestId("held").textContent())) ?? ""
      const [, since, next] = HELD.exec(sentence) ?? []
      // The instants as the reader's locale writes them, like every other time on the page.
      const listed = (yield* admin("GET", `/v1/accounts/${account.id}/deliveries`)).json as { deliveries: Array<{ held: { failing_since: string } | null }> }
      const failingSince = listed.deliveries.find((d) => d.held !== null)!.held!.failing_since
      expect(since).toBe(yield* promise(() => page.evaluate((at) => new Date(at).toLocaleString(), failingSince)))
      expect(Number.isNaN(Date.parse(next ?? ""))).toBe(false)
      expect(yield* promise(() => held.first().getAttribute("data-status"))).toBe("pending")
      yield* noSeriousViolations(page, "[data-card=activity]")
      yield* promise(() => screenshot(page, "[data-card=activity]", "delivery-held"))

      // Back: the next probe finds it answering and everything held is delivered.
      receiver.answer(path, 204)
      yield* promise(() => page.reload())
      yield* promise(() => page.getByLabel("Status", { exact: true }).selectOption("delivered"))
      yield* promise(() => page.getByTestId("delivery-row").filter({ hasText: "HTTP 204" }).nth(3).waitFor(WAIT))
      yield* promise(() => page.getByLabel("Status", { exact: true }).selectOption(""))
      yield* promise(() => page.getByTestId("delivery-row").nth(3).waitFor(WAIT))
      expect(yield* promise(() => page.getByTestId("held").count())).toBe(0)
      expect(errors).toEqual([])
    }))
})
