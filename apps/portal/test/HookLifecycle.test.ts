/**
 * A hook's lifecycle in the Integrations area, in a real browser against a
 * real server and an HTTPS receiver on loopback (issue 16): a disabled hook
 * shows when and why and is enabled again in one click; recover refuses a
 * bad window with the server's sentence and shows its progress to the end;
 * a receiver's 410 Gone shows the hook as removed, and its delivery as gone.
 * Each state is scanned with axe-core and photographed.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { screenshot } from "./support/Browser.js"
import { noSeriousViolations, promise, signedIn, WAIT, waitFor } from "./support/SignedIn.js"
import { admin, TestReceiver } from "./support/Stack.js"
import * as Stack from "./support/Stack.js"

/** Adds a hook for `target` in the page and answers its row. */
const addHook = (page: Page, target: string) =>
  Effect.gen(function*() {
    yield* promise(() => page.getByLabel("Receiver URL").fill(target))
    yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
    const hook = page.getByTestId("hook-row").filter({ hasText: target })
    yield* promise(() => hook.waitFor(WAIT))
    return hook
  })

/** The `datetime-local` value of an instant `offsetMs` from now, in the browser's zone. */
const localInput = (page: Page, offsetMs: number) =>
  promise(() =>
    page.evaluate((offset) => {
      const at = Date.now() + offset
      return new Date(at - new Date(at).getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
    }, offsetMs)
  )

layer(Stack.Live, { timeout: 600_000, excludeTestServices: true })("Hook lifecycle in the Integrations area", (it) => {
  it.scoped("a disabled hook shows when and why (\"the account and the operator see when and why\"), and \"re-enabling is one action\"; disabling in the page is one action too", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { account, errors, page } = yield* signedIn()
      const target = receiver.url(`/disabled/${Date.now()}`)
      const hook = yield* addHook(page, target)
      const listed = (yield* admin("GET", `/v1/accounts/${account.id}/subscriptions`)).json as { subscriptions: Array<{ id: string }> }
      const id = listed.subscriptions[0]!.id
      const reason = "Receiver under maintenance until Monday"
      expect((yield* admin("POST", `/v1/accounts/${account.id}/subscriptions/${id}/disable`, { reason })).status).toBe(200)

      yield* promise(() => page.reload())
      const state = hook.getByTestId("hook-state")
      yield* promise(() => state.waitFor(WAIT))
      const shown = (yield* promise(() => state.textContent())) ?? ""
      expect(shown).toContain("disabled since")
      expect(shown).toContain(reason)
      expect(yield* promise(() => state.locator("time").getAttribute("datetime"))).toMatch(/^\d{4}-\d\d-\d\dT/)
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "hook-disabled"))

      yield* promise(() => hook.getByRole("button", { name: "Enable", exact: true }).click())
      yield* promise(() => page.getByText("Hook enabled: new events are sent to it again.").waitFor(WAIT))
      yield* promise(() => hook.getByRole("button", { name: "Disable", exact: true }).waitFor(WAIT))
      expect(yield* promise(() => hook.getByTestId("hook-state").count())).toBe(0)
      expect(((yield* admin("GET", `/v1/accounts/${account.id}/subscriptions/${id}`)).json as { state: string }).state).toBe("active")

      // Disabled from the page: the reason says where.
      yield* promise(() => hook.getByRole("button", { name: "Disable", exact: true }).click())
      yield* promise(() => hook.getByTestId("hook-state").getByText(/Disabled in the Integrations area/).waitFor(WAIT))
      const status = (yield* admin("GET", `/v1/accounts/${account.id}/subscriptions/${id}`)).json as { state: string; disabled_reason: string }
      expect([status.state, status.disabled_reason]).toEqual(["disabled", "Disabled in the Integrations area."])
      expect(errors).toEqual([])
    }))

  it.scoped("recover refuses a bad window with the server's sentence, nothing changed (\"a recover window in the future or reversed\" → a clear error; a disabled hook: enable it first)", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { errors, page } = yield* signedIn()
      const hook = yield* addHook(page, receiver.url(`/window/${Date.now()}`))
      yield* promise(() => hook.getByRole("button", { name: "Recover…" }).click())
      const form = hook.getByTestId("recover-form")
      const alert = form.getByRole("alert")

      const inTwoHours = yield* localInput(page, 2 * 3_600_000)
      yield* promise(() => form.getByLabel("Since").fill(inTwoHours))
      yield* promise(() => form.getByRole("button", { name: "Recover" }).click())
      yield* promise(() => alert.getByText(/is in the future; recover replays what already happened/).waitFor(WAIT))

      const hourAgo = yield* localInput(page, -3_600_000)
      const twoHoursAgo = yield* localInput(page, -7_200_000)
      yield* promise(() => form.getByLabel("Since").fill(hourAgo))
      yield* promise(() => form.getByLabel("Until (optional)").fill(twoHoursAgo))
      yield* promise(() => form.getByRole("button", { name: "Recover" }).click())
      yield* promise(() => alert.getByText(/The window is reversed/).waitFor(WAIT))
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "recover-refused"))
      expect(yield* promise(() => form.getByTestId("recovery").count())).toBe(0)

      // While disabled: refused, with the next step.
      yield* promise(() => hook.getByRole("button", { name: "Disable", exact: true }).click())
      yield* promise(() => hook.getByTestId("hook-state").waitFor(WAIT))
      yield* promise(() => form.getByLabel("Until (optional)").fill(""))
      yield* promise(() => form.getByRole("button", { name: "Recover" }).click())
      yield* promise(() => alert.getByText(/is disabled; enable it first, then recover/).waitFor(WAIT))
      expect(errors).toEqual([])
    }))

  it.scoped("recover \"replays every failed or ended delivery of that subscription since a given time\" as a background job, and the page shows its progress until done; the receiver gets the same webhook-id again", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const sql = yield* SqlClient.SqlClient
      const { errors, page } = yield* signedIn()
      const path = `/recover/${Date.now()}`
      receiver.answer(path, 503)
      const target = receiver.url(path)
      const hook = yield* addHook(page, target)
      yield* promise(() => hook.getByRole("button", { name: "Send test event" }).click())
      yield* promise(() => hook.getByText("Test event not delivered").waitFor(WAIT))
      // The retry schedule ends hours later; its end (a dead letter) is written directly.
      yield* sql`UPDATE deliveries SET status = 'failed', last_error = 'Gave up after 1 attempt: The receiver answered 503.'
                 WHERE target_url = ${target}`
      receiver.answer(path, 200)

      yield* promise(() => hook.getByRole("button", { name: "Recover…" }).click())
      const form = hook.getByTestId("recover-form")
      // The default window: the last 24 hours.
      yield* promise(() => form.getByRole("button", { name: "Recover" }).click())
      const progress = form.getByTestId("recovery")
      yield* promise(() => progress.getByText("Recovery done: 1 of 1 deliveries queued again.").waitFor(WAIT))
      expect(yield* promise(() => progress.locator("progress").getAttribute("value"))).toBe("1")
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "recover-done"))

      yield* Effect.promise(() => waitFor(() => receiver.received().filter((r) => target.endsWith(r.path)).length === 2))
      const sent = receiver.received().filter((r) => target.endsWith(r.path))
      expect(sent[1]!.headers["webhook-id"]).toBe(sent[0]!.headers["webhook-id"])
      expect(errors).toEqual([])
    }))

  it.scoped("a receiver that answers 410 Gone: the hook shows as removed (\"the removal shows in ... the Integrations area\") without a reload, its delivery as gone in the activity and the attempt log, and not replayable, with the reason", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { errors, page } = yield* signedIn()
      const path = `/gone/${Date.now()}`
      receiver.answer(path, 410)
      const target = receiver.url(path)
      const hook = yield* addHook(page, target)
      yield* promise(() => hook.getByRole("button", { name: "Send test event" }).click())

      // No reload: the hook list refreshes itself, as the activity does (the row, with its test result,
      // may leave the list as soon as the 410 removed the hook).
      const removed = page.getByTestId("removed-hooks")
      yield* promise(() => removed.getByText("Removed hooks (1)").waitFor(WAIT))
      yield* promise(() => removed.getByText("Removed hooks (1)").click())
      const row = removed.getByTestId("removed-hook").filter({ hasText: target })
      yield* promise(() => row.getByText("gone — the receiver said the hook no longer exists").waitFor(WAIT))
      expect(yield* promise(() => page.getByTestId("hook-row").filter({ hasText: target }).count())).toBe(0)
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "hook-gone"))

      yield* promise(() => page.getByLabel("Status", { exact: true }).selectOption("ended"))
      const delivery = page.getByTestId("delivery-row").filter({ hasText: "HTTP 410" })
      yield* promise(() => delivery.getByTestId("end-reason").getByText("gone — the receiver said the hook no longer exists").waitFor(WAIT))
      yield* promise(() => delivery.getByRole("button", { name: "Details" }).click())
      const detail = page.getByTestId("delivery-detail")
      yield* promise(() => detail.locator("li").getByText(/gone — the receiver said the hook no longer exists/).first().waitFor(WAIT))
      // A replay would send nothing to a hook that is gone: no Replay button, the reason instead.
      yield* promise(() => detail.getByTestId("not-replayable").getByText(/subscription was removed after its receiver answered 410 Gone, so a replay would send nothing/).waitFor(WAIT))
      expect(yield* promise(() => detail.getByRole("button", { name: "Replay" }).count())).toBe(0)
      yield* noSeriousViolations(page, "[data-card=activity]")
      yield* promise(() => screenshot(page, "[data-card=activity]", "activity-gone"))
      expect(errors).toEqual([])
    }))
})
