/**
 * Debian's chromium driven by playwright-core (no browser download), headless,
 * with a fresh profile per browser, plus what every page check needs: the
 * accessibility scan (axe-core evaluated in the page: evaluation is not page
 * script, so the strict CSP stays on), screenshots into the test output, and
 * every console message that reports a CSP refusal or an error.
 */
import axe from "axe-core"
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"

/** Where Debian installs chromium (`.ci/run` installs it with apt when missing). */
export const CHROMIUM = "/usr/bin/chromium"

/** Launch arguments: no sandbox (containers), no GPU, nothing in the background that could reach the network. */
export const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run"
]

/** Screenshots and other artifacts of the browser tests. */
export const OUTPUT = Path.join(import.meta.dirname, "..", "..", "test-output")

/** A browser with a fresh profile, closed (and its profile removed) with the scope. */
export const launch = (viewport = { width: 1280, height: 900 }): Effect.Effect<BrowserContext, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.promise(async () => {
        const profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-portal-chromium-"))
        const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport })
        return { context, profile }
      }),
      // The profile goes once the browser has exited (it writes into it until then).
      ({ context, profile }) =>
        Effect.promise(() => context.close()).pipe(
          Effect.andThen(Effect.promise(() => Fs.promises.rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 })))
        )
    ),
    ({ context }) => context
  )

/**
 * Console lines of `page` that report an error (CSP refusals included); the
 * browser's note of an API answer with an error status is left out (the page
 * shows those answers as they are meant to be shown).
 */
export const consoleErrors = (page: Page): Array<string> => {
  const lines: Array<string> = []
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource: the server responded with a status of")) {
      lines.push(message.text())
    }
  })
  page.on("pageerror", (error) => lines.push(String(error)))
  return lines
}

/** Violations of impact serious or critical inside `selector`, as "rule: target" lines. */
export const seriousViolations = (page: Page, selector: string): Promise<ReadonlyArray<string>> =>
  page.evaluate(axe.source).then(() =>
    page.evaluate(async (within) => {
      const w = window as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: ReadonlyArray<{ id: string; impact: string | null; nodes: ReadonlyArray<{ target: ReadonlyArray<string> }> }> }> } }
      const result = await w.axe.run({ include: [within] }, { resultTypes: ["violations"] })
      return result.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)
    }, selector)
  )

/** Writes a screenshot of `selector` to the test output as `name.png` (and, when asked, to the README's docs). */
export const screenshot = async (page: Page, selector: string, name: string): Promise<string> => {
  Fs.mkdirSync(OUTPUT, { recursive: true })
  const file = Path.join(OUTPUT, `${name}.png`)
  await page.locator(selector).first().screenshot({ path: file })
  return file
}
