/**
 * The Integrations area end to end, in a real browser (Debian's chromium
 * through playwright-core) against a real server, the reference bridge and
 * an HTTPS receiver, all on loopback. Each card is scanned with axe-core (no
 * serious or critical violation) and photographed into the test output.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { Effect } from "effect"
import { launch, screenshot } from "./support/Browser.js"
import { noSeriousViolations, promise, signedIn, WAIT, waitFor } from "./support/SignedIn.js"
import { accountWithLink, admin, TENANT, TestReceiver, urls } from "./support/Stack.js"
import * as Stack from "./support/Stack.js"

layer(Stack.Live, { timeout: 600_000, excludeTestServices: true })("Integrations area in a browser", (it) => {
  it.scoped("Access: a single-use link logs in once and not twice; the session cookie is HttpOnly and SameSite=Strict; the page runs under the strict CSP without a refusal", () =>
    Effect.gen(function*() {
      const { account, context, errors, page } = yield* signedIn("live", "Once Only Ltd")
      expect(yield* promise(() => page.getByText("Once Only Ltd").isVisible())).toBe(true)
      const cookies = yield* promise(() => context.cookies())
      expect(cookies.map((c) => [c.name, c.httpOnly, c.sameSite])).toEqual([["crm_relay_portal", true, "Strict"]])
      // The address bar keeps no token.
      expect(page.url()).not.toContain("token")

      // The same link again, in another browser: refused, with the next step.
      const other = yield* launch()
      const second = yield* promise(() => other.newPage())
      yield* promise(() => second.goto(account.url))
      const refused = second.getByTestId("signed-out")
      yield* promise(() => refused.waitFor(WAIT))
      expect(yield* promise(() => refused.textContent())).toContain("already been used or has expired")
      expect(yield* promise(() => other.cookies())).toEqual([])
      expect(errors).toEqual([])
    }))

  it.scoped("Webhook card: a key is created with a label, shown once with a copy button, and never again after a reload; it is turned off after a confirmation", () =>
    Effect.gen(function*() {
      const { errors, page } = yield* signedIn()
      yield* promise(() => page.getByLabel("Label").fill("Zapier"))
      yield* promise(() => page.getByRole("button", { name: "Create key" }).click())
      const shown = page.getByTestId("new-key-value")
      yield* promise(() => shown.waitFor(WAIT))
      const key = (yield* promise(() => shown.textContent())) ?? ""
      expect(key).toMatch(/^crk_[A-Za-z0-9_-]{64}$/)
      expect(yield* promise(() => page.getByRole("button", { name: "Copy key" }).isVisible())).toBe(true)
      const row = page.getByTestId("key-row").filter({ hasText: "Zapier" })
      yield* promise(() => row.waitFor(WAIT))
      expect(yield* promise(() => row.textContent())).toContain(key.slice(-4))
      yield* noSeriousViolations(page, "[data-card=keys]")
      yield* promise(() => screenshot(page, "[data-card=webhooks]", "webhooks-card"))

      yield* promise(() => page.reload())
      yield* promise(() => page.getByTestId("key-row").first().waitFor(WAIT))
      expect(yield* promise(() => page.getByTestId("new-key").count())).toBe(0)
      expect(yield* promise(() => page.content())).not.toContain(key)

      // Turning off asks first; cancelling changes nothing.
      yield* promise(() => row.getByRole("button", { name: "Turn off…" }).click())
      yield* promise(() => row.getByRole("button", { name: "Cancel" }).click())
      expect(yield* promise(() => row.textContent())).toContain("on")
      yield* promise(() => row.getByRole("button", { name: "Turn off…" }).click())
      yield* promise(() => row.getByRole("button", { name: "Turn off key" }).click())
      yield* promise(() => row.getByText("turned off").waitFor(WAIT))
      // The key no longer opens the Event API.
      const { public: publicUrl } = yield* urls
      const status = yield* promise(() => fetch(`${publicUrl}/perform-list`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status))
      expect(status).toBe(401)
      expect(errors).toEqual([])
    }))

  it.scoped("Webhook card: a hook added in the page receives a test event at a local HTTPS receiver that verifies the signature (Standard Webhooks), and the page shows the attempt's result", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { errors, page } = yield* signedIn()
      yield* promise(() => page.getByRole("button", { name: "Reveal secret" }).click())
      const secretText = page.getByTestId("signing-secret")
      yield* promise(() => secretText.waitFor(WAIT))
      const secret = (yield* promise(() => secretText.textContent())) ?? ""
      expect(secret).toMatch(/^whsec_/)
      receiver.expectSecret(secret)

      const target = receiver.url(`/ok/${Date.now()}`)
      yield* promise(() => page.getByLabel("Receiver URL").fill(target))
      yield* promise(() => page.locator("[data-card=hooks]").getByLabel("Event").selectOption("all"))
      yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
      const hook = page.getByTestId("hook-row").filter({ hasText: target })
      yield* promise(() => hook.waitFor(WAIT))
      expect(yield* promise(() => hook.textContent())).toContain("added in this page")
      yield* promise(() => hook.getByRole("button", { name: "Send test event" }).click())
      const result = hook.getByTestId("test-result")
      yield* promise(() => result.getByText("Test event delivered").waitFor(WAIT))
      expect(yield* promise(() => result.textContent())).toMatch(/receiver answered 200 in \d+ ms/)

      const got = receiver.received().filter((r) => target.endsWith(r.path))
      expect(got).toHaveLength(1)
      expect(got[0]!.verified).toBe(true)
      expect(JSON.parse(got[0]!.body)).toMatchObject({ event: "lead", source: "Test event from the Integrations area" })

      // Rotation with an overlap: the next test event carries two signatures, each verifying with its own secret.
      yield* promise(() => page.getByRole("button", { name: "Rotate secret" }).click())
      yield* promise(() => page.getByText("Both secrets sign deliveries").waitFor(WAIT))
      yield* promise(() => hook.getByRole("button", { name: "Send test event" }).click())
      yield* Effect.promise(() => waitFor(() => receiver.received().filter((r) => target.endsWith(r.path)).length === 2))
      const rotated = receiver.received().filter((r) => target.endsWith(r.path))[1]!
      expect(rotated.headers["webhook-signature"]!.split(" ")).toHaveLength(2)
      expect(rotated.verified).toBe(true)

      yield* promise(() => page.locator("details summary").click())
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* noSeriousViolations(page, "[data-card=signing-secret]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "hooks"))
      yield* promise(() => screenshot(page, "[data-card=signing-secret]", "signing-secret"))
      expect(errors).toEqual([])
    }))

  it.scoped("CRM bridge card: \"Test connection\" runs the capabilities check against the reference bridge and shows what it advertised; Save stores it with the secret write-only; a wrong key fails with a clear cause; \"Check conformance\" on the stored connection shows the verdict and every check", () =>
    Effect.gen(function*() {
      const bridge = yield* ReferenceBridge.ReferenceBridge
      const { errors, page } = yield* signedIn()
      yield* promise(() => page.getByRole("button", { name: "Connect a tenant…" }).click())
      const form = page.getByTestId("connection-form")
      yield* promise(() => form.getByLabel("Tenant ID").fill(TENANT.tenantId))
      yield* promise(() => form.getByLabel("Bridge base URL").fill(bridge.restBaseUrl))
      yield* promise(() => form.getByRole("textbox", { name: "API key" }).fill("not-the-key"))
      yield* promise(() => form.getByRole("button", { name: "Test connection" }).click())
      const failure = form.getByRole("alert")
      yield* promise(() => failure.waitFor(WAIT))
      const cause = (yield* promise(() => failure.textContent())) ?? ""
      expect(cause).toContain("refused the credential (401)")
      expect(cause).toContain("Check the API key")
      expect(yield* promise(() => form.getByRole("button", { name: "Save" }).isDisabled())).toBe(true)

      yield* promise(() => form.getByRole("textbox", { name: "API key" }).fill(TENANT.apiKey))
      yield* promise(() => form.getByRole("button", { name: "Test connection" }).click())
      const caps = form.getByTestId("capabilities")
      yield* promise(() => caps.waitFor(WAIT))
      const advertised = (yield* promise(() => caps.textContent())) ?? ""
      expect(advertised).toContain("contacts.upsert")
      expect(advertised).toContain("a booking closes availability")
      yield* noSeriousViolations(page, "[data-card=bridge]")
      yield* promise(() => screenshot(page, "[data-card=bridge]", "bridge-form"))

      yield* promise(() => form.getByRole("button", { name: "Save" }).click())
      const row = page.getByTestId("connection-row")
      yield* promise(() => row.waitFor(WAIT))
      const text = (yield* promise(() => row.textContent())) ?? ""
      expect(text).toContain(`Tenant ${TENANT.tenantId}`)
      expect(text).toMatch(/API key set on/)
      expect(yield* promise(() => page.content())).not.toContain(TENANT.apiKey)
      yield* promise(() => screenshot(page, "[data-card=bridge]", "bridge-card"))

      // The stored connection's read-only conformance check, from its row.
      yield* promise(() => row.getByRole("button", { name: "Check conformance" }).click())
      const verdict = row.getByTestId("conformance-verdict")
      yield* promise(() => verdict.waitFor(WAIT))
      expect((yield* promise(() => verdict.textContent())) ?? "").toMatch(/^Conformant: the bridge earns the read-only level of svc\.crm\.v1\. \d+ passed · 0 failed/)
      yield* promise(() => row.getByText(/^All \d+ checks$/).click())
      const checks = row.getByTestId("conformance-check")
      expect(yield* promise(() => checks.count())).toBeGreaterThan(5)
      expect((yield* promise(() => checks.first().textContent())) ?? "").toMatch(/^PASScapabilities\./)
      yield* noSeriousViolations(page, "[data-card=bridge]")
      yield* promise(() => screenshot(page, "[data-card=bridge]", "bridge-conformance"))
      expect(errors).toEqual([])
    }))

  it.scoped("Activity card: a failed delivery is shown with its attempts and payload, and replayed from the page", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const sql = yield* SqlClient.SqlClient
      const { errors, page } = yield* signedIn()
      const path = `/down/${Date.now()}`
      receiver.answer(path, 503)
      const target = receiver.url(path)
      yield* promise(() => page.getByLabel("Receiver URL").fill(target))
      yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
      const hook = page.getByTestId("hook-row").filter({ hasText: target })
      yield* promise(() => hook.getByRole("button", { name: "Send test event" }).click())
      yield* promise(() => hook.getByText("Test event not delivered").waitFor(WAIT))
      // The retry schedule ends hours later; its end (a dead letter) is written directly.
      yield* sql`UPDATE deliveries SET status = 'failed', last_error = 'Gave up after 1 attempt: The receiver answered 503.'
                 WHERE target_url = ${target}`
      receiver.answer(path, 200)

      yield* promise(() => page.getByLabel("Status", { exact: true }).selectOption("failed"))
      const row = page.getByTestId("delivery-row").filter({ hasText: "HTTP 503" })
      yield* promise(() => row.waitFor(WAIT))
      yield* promise(() => row.getByRole("button", { name: "Details" }).click())
      const detail = page.getByTestId("delivery-detail")
      yield* promise(() => detail.getByText("The receiver answered 503.").first().waitFor(WAIT))
      expect(yield* promise(() => detail.textContent())).toContain("\"source\": \"Test event from the Integrations area\"")
      yield* noSeriousViolations(page, "[data-card=activity]")
      yield* promise(() => screenshot(page, "[data-card=activity]", "activity"))

      yield* promise(() => detail.getByRole("button", { name: "Replay" }).click())
      yield* promise(() => detail.getByText("Queued again").waitFor(WAIT))
      yield* promise(() => page.getByLabel("Status", { exact: true }).selectOption("delivered"))
      yield* promise(() => page.getByTestId("delivery-row").filter({ hasText: "HTTP 200" }).waitFor(WAIT))
      expect(receiver.received().filter((r) => target.endsWith(r.path)).length).toBe(2)
      expect(errors).toEqual([])
    }))

  it.scoped("CRM bridge card: a demo account sees why it cannot connect a real CRM, and the form is disabled", () =>
    Effect.gen(function*() {
      const { errors, page } = yield* signedIn("demo", "Demo Co")
      const notice = page.getByTestId("not-allowed")
      yield* promise(() => notice.getByText("demo account: its calls never reach a real CRM").waitFor(WAIT))
      expect(yield* promise(() => notice.textContent())).toContain("demo account: its calls never reach a real CRM")
      expect(yield* promise(() => page.getByTestId("connection-form").locator("fieldset").getAttribute("disabled"))).not.toBeNull()
      expect(yield* promise(() => page.getByRole("textbox", { name: "Bridge base URL" }).isDisabled())).toBe(true)
      expect(yield* promise(() => page.getByRole("button", { name: "Test connection" }).isDisabled())).toBe(true)
      yield* noSeriousViolations(page, "[data-card=bridge]")
      yield* promise(() => screenshot(page, "[data-card=bridge]", "bridge-demo"))
      expect(errors).toEqual([])
    }))

  it.scoped("Isolation: one account's session cannot see or change another's keys, hooks or deliveries, even by id", () =>
    Effect.gen(function*() {
      const other = yield* accountWithLink("live", "Other Account")
      const created = yield* admin("POST", `/v1/accounts/${other.id}/keys`)
      const otherKey = (created.json as { id: string; key: string })
      const { page } = yield* signedIn("live", "Mine")
      expect(yield* promise(() => page.getByTestId("key-row").count())).toBe(0)
      // From the page itself, with its own session and CSRF token, aiming at the other account's key.
      const answer = yield* promise(() =>
        page.evaluate(async (keyId) => {
          const session = await fetch("/api/session").then((r) => r.json() as Promise<{ csrf_token: string }>)
          const r = await fetch(`/api/keys/${keyId}/disable`, { method: "POST", headers: { "x-csrf-token": session.csrf_token } })
          return r.status
        }, otherKey.id)
      )
      expect(answer).toBe(404)
      const { public: publicUrl } = yield* urls
      const still = yield* promise(() => fetch(`${publicUrl}/perform-list`, { headers: { authorization: `Bearer ${otherKey.key}` } }).then((r) => r.status))
      expect(still).toBe(200)
    }))

  it.scoped("Layout: the whole page at a phone's width (390 px) has no serious or critical accessibility violation", () =>
    Effect.gen(function*() {
      const account = yield* accountWithLink("live", "Phone Width")
      const context = yield* launch({ width: 390, height: 844 })
      const page = yield* promise(() => context.newPage())
      yield* promise(() => page.goto(account.url))
      yield* promise(() => page.getByRole("heading", { name: "Activity" }).waitFor(WAIT))
      yield* noSeriousViolations(page, "body")
      const overflow = yield* promise(() => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth))
      expect(overflow).toBeLessThanOrEqual(0)
      yield* promise(() => screenshot(page, "body", "phone"))
    }))
})
