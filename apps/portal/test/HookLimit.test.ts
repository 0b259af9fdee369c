/**
 * The bound on an account's hooks in the Integrations area (issue 35): the
 * hooks card says "N of M hooks", and adding one past the bound shows the
 * server's sentence, nothing added. The stack runs with the default bound.
 */
import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { screenshot } from "./support/Browser.js"
import { noSeriousViolations, promise, signedIn, WAIT } from "./support/SignedIn.js"
import { TestReceiver } from "./support/Stack.js"
import * as Stack from "./support/Stack.js"

/** MAX_SUBSCRIPTIONS_PER_ACCOUNT's default, which the stack's server runs with. */
const LIMIT = 100

layer(Stack.Live, { timeout: 600_000, excludeTestServices: true })("Hook limit in the Integrations area", (it) => {
  it.scoped("Issue 35 \"It shows in the Integrations area\": the hooks card says N of M hooks; past the bound adding one shows the sentence with the limit and how to remove one", () =>
    Effect.gen(function*() {
      const receiver = yield* TestReceiver
      const { account, errors, page } = yield* signedIn()
      const usage = page.getByTestId("hook-usage")
      yield* promise(() => usage.getByText(`0 of ${LIMIT} hooks`).waitFor(WAIT))

      // All but one hook already there (as a platform's subscribes would leave them), then the last one added in the page.
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO subscriptions (account_id, target_url, event)
                 SELECT ${account.id}, ${receiver.url("/seeded/")} || n, 'lead' FROM generate_series(1, ${LIMIT - 1}) AS n`.pipe(Effect.orDie)
      yield* promise(() => page.reload())
      yield* promise(() => usage.getByText(`${LIMIT - 1} of ${LIMIT} hooks`).waitFor(WAIT))

      const last = receiver.url(`/last/${Date.now()}`)
      yield* promise(() => page.getByLabel("Receiver URL").fill(last))
      yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
      yield* promise(() => page.getByText("Hook added.").waitFor(WAIT))
      yield* promise(() => usage.getByText(`${LIMIT} of ${LIMIT} hooks: remove one before adding another.`).waitFor(WAIT))

      const past = receiver.url(`/past/${Date.now()}`)
      yield* promise(() => page.getByLabel("Receiver URL").fill(past))
      yield* promise(() => page.getByRole("button", { name: "Add hook" }).click())
      yield* promise(() =>
        page.getByText(
          `This account has ${LIMIT} hooks, the most it may have is ${LIMIT}; remove one in the list above (or through DELETE /subscribe/{id}) before adding another.`
        ).waitFor(WAIT)
      )
      yield* noSeriousViolations(page, "[data-card=hooks]")
      yield* promise(() => screenshot(page, "[data-card=hooks]", "hook-limit"))
      expect(yield* promise(() => page.getByTestId("hook-row").filter({ hasText: past }).count())).toBe(0)
      const stored = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM subscriptions WHERE account_id = ${account.id} AND removed_at IS NULL`.pipe(Effect.orDie)
      expect(stored[0]!.n).toBe(LIMIT)
      expect(errors).toEqual([])
    }))
})
