/**
 * What the browser tests share: the generous wait, a page signed in through
 * a fresh single-use link, the axe check of one card, and waiting on a
 * condition outside the page.
 */
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { consoleErrors, launch, seriousViolations } from "./Browser.js"
import { accountWithLink } from "./Stack.js"

/** Generous bound for a condition on a loaded machine (the delivery worker, the bridge, the browser). */
export const WAIT = { timeout: 120_000 }

/** A promise as an effect. */
export const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** A browser page signed in through a fresh link to a new account of `mode`. */
export const signedIn = (mode: "live" | "demo" | "sandbox" = "live", name?: string) =>
  Effect.gen(function*() {
    const account = yield* accountWithLink(mode, name)
    const context = yield* launch()
    const page = yield* promise(() => context.newPage())
    const errors = consoleErrors(page)
    yield* promise(() => page.goto(account.url))
    yield* promise(() => page.getByRole("heading", { name: "Integrations", level: 1 }).waitFor(WAIT))
    yield* promise(() => page.getByRole("heading", { name: "Webhooks and automation" }).waitFor(WAIT))
    return { account, context, page, errors }
  })

/** No serious or critical axe violation in `selector`. */
export const noSeriousViolations = (page: Page, selector: string) =>
  Effect.map(promise(() => seriousViolations(page, selector)), (violations) => expect(violations).toEqual([]))

/** Resolves once `condition` holds (checked every 100 ms), rejects after the generous bound. */
export const waitFor = (condition: () => boolean): Promise<void> =>
  new Promise((resolve, reject) => {
    const deadline = Date.now() + WAIT.timeout
    const check = () =>
      condition() ? resolve() : Date.now() > deadline ? reject(new Error("condition not met in time")) : setTimeout(check, 100)
    check()
  })
