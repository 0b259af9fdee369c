/**
 * n8n's editor in Debian's chromium, driven by playwright-core (no browser download; `.ci/run`
 * installs chromium): signs in as the owner and takes a screenshot of a workflow's canvas.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium } from "playwright-core"
import { OWNER } from "./N8nServer.mjs"

const CHROMIUM = "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]

/** Writes a screenshot of workflow `workflowId`, as its editor shows it, to `file`; answers the names of the nodes on the canvas. */
export const screenshotWorkflow = (options: { readonly url: string; readonly workflowId: string; readonly file: string }) =>
  Effect.acquireUseRelease(
    Effect.promise(async () => {
      const profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-n8n-chromium-"))
      // The test's CA is n8n's issuer; the browser is told to accept it rather than given the CA.
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ARGS,
        viewport: { width: 1280, height: 720 },
        ignoreHTTPSErrors: true
      })
      return { context, profile }
    }),
    ({ context }) =>
      Effect.promise(async () => {
        const page = context.pages()[0] ?? (await context.newPage())
        page.setDefaultTimeout(120_000)
        await page.goto(`${options.url}/signin`)
        await page.locator("input[type=email]").fill(OWNER.email)
        await page.locator("input[type=password]").fill(OWNER.password)
        await page.locator("input[type=password]").press("Enter")
        await page.waitForURL((url) => !url.pathname.startsWith("/signin"))
        await page.goto(`${options.url}/workflow/${options.workflowId}`)
        const nodes = page.locator(".vue-flow__node")
        await nodes.nth(1).waitFor()
        // Whatever n8n offers on a first visit (tours, banners) is closed with Escape; the canvas settles.
        await page.keyboard.press("Escape")
        await page.waitForTimeout(1500)
        Fs.mkdirSync(Path.dirname(options.file), { recursive: true })
        await page.screenshot({ path: options.file })
        return await nodes.allInnerTexts()
      }),
    ({ context, profile }) =>
      Effect.promise(() => context.close()).pipe(
        Effect.andThen(Effect.promise(() => Fs.promises.rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 })))
      )
  )
