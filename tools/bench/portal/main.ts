/**
 * The Integrations area's weight and first load, on the built binary:
 *
 *   npm run build && npm run bench:portal -- [--rounds 5]
 *
 * Prints the size of the built page (each file raw and gzipped, and the
 * total gzipped), then starts `crm-relay serve` on an embedded database in a
 * fresh DATA_DIR (ports chosen by the system) and, each round, in a fresh
 * headless chromium profile (cold cache), alternates a baseline — the same
 * browser fetching a tiny static file of the same listener — with the page:
 * a fresh single-use link opened until every card shows its data. Prints the
 * medians: browser launch excluded, from navigation start to the page's
 * `load` event and to all three cards filled, and the baseline. The load
 * average is printed with them: on a shared machine the figures move with it.
 */
import { Console, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Zlib from "node:zlib"
import { chromium } from "playwright-core"
import * as Argv from "../support/Argv.js"
import { runMain } from "../support/runMain.js"

const BIN = fileURLToPath(new URL("../../../apps/server/bin/crm-relay.js", import.meta.url))
const PAGE = fileURLToPath(new URL("../../../apps/server/dist/portal", import.meta.url))
const CHROMIUM = "/usr/bin/chromium"
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
const TOKEN = "bench-portal-admin-token-0123456789"

const rounds = Argv.integer("rounds", 5)

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`

const sizes = Effect.sync(() => {
  const files: Array<string> = []
  const walk = (dir: string) => {
    for (const item of Fs.readdirSync(dir, { withFileTypes: true })) {
      const file = Path.join(dir, item.name)
      if (item.isDirectory()) walk(file)
      else files.push(file)
    }
  }
  walk(PAGE)
  let total = 0
  const lines = files.sort().map((file) => {
    const body = Fs.readFileSync(file)
    const gz = Zlib.gzipSync(body).length
    total += gz
    return `  ${Path.relative(PAGE, file).padEnd(32)} ${kib(body.length).padStart(10)}  gzip ${kib(gz).padStart(9)}`
  })
  return { lines, total }
})

const serve = Effect.acquireRelease(
  Effect.async<{ child: ChildProcess.ChildProcess; admin: string; portal: string; dataDir: string }, Error>((resume) => {
    const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-portal-"))
    const child = ChildProcess.spawn(process.execPath, [BIN, "serve"], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { PATH: process.env["PATH"] ?? "", DATA_DIR: dataDir, PORT: "0", ADMIN_PORT: "0", PORTAL_PORT: "0", ADMIN_TOKEN: TOKEN, LOG_LEVEL: "Info" }
    })
    let buffered = ""
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      for (const line of buffered.split("\n")) {
        if (!line.includes("crm-relay is serving")) continue
        const record = JSON.parse(line) as { internal_api: string; portal: string }
        child.stdout.removeAllListeners("data")
        child.stdout.resume()
        resume(Effect.succeed({ child, admin: record.internal_api, portal: record.portal, dataDir }))
      }
    })
    child.once("exit", (code) => resume(Effect.fail(new Error(`crm-relay serve exited (${code}) before it listened`))))
  }),
  ({ child, dataDir }) =>
    Effect.async<void>((resume) => {
      child.once("exit", () => {
        Fs.rmSync(dataDir, { recursive: true, force: true })
        resume(Effect.void)
      })
      child.kill("SIGTERM")
    })
)

const admin = (base: string, method: string, path: string, body?: unknown) =>
  Effect.promise(() =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }).then((r) => r.json() as Promise<Record<string, string>>)
  )

/** One cold browser: the time from navigation start to `load`, and to `ready` (resolved in the page). */
const inBrowser = <A>(run: (page: import("playwright-core").Page) => Promise<A>) =>
  Effect.promise(async () => {
    const profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-bench-chromium-"))
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS })
    try {
      return await run(await context.newPage())
    } finally {
      await context.close()
      await Fs.promises.rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 })
    }
  })

const main = Effect.gen(function*() {
  const built = yield* sizes
  yield* Console.log(`Integrations area page (${Path.relative(process.cwd(), PAGE)}):\n${built.lines.join("\n")}\n  total gzipped: ${kib(built.total)}`)
  const server = yield* serve
  const account = yield* admin(server.admin, "POST", "/v1/accounts", { name: "Bench", mode: "live" })
  const baseline: Array<number> = []
  const load: Array<number> = []
  const ready: Array<number> = []
  for (let round = 1; round <= rounds; round++) {
    baseline.push(
      yield* inBrowser(async (page) => {
        const started = Date.now()
        await page.goto(`${server.portal}/favicon.svg`)
        return Date.now() - started
      })
    )
    const link = yield* admin(server.admin, "POST", `/v1/accounts/${account["id"]}/portal-sessions`)
    const [loadMs, readyMs] = yield* inBrowser(async (page) => {
      const started = Date.now()
      await page.goto(link["url"] ?? "", { waitUntil: "load" })
      const loaded = Date.now() - started
      // Every card filled: keys, hooks, the signing secret, the bridge listing and both activity lists.
      await page.getByText("No keys yet.").waitFor({ timeout: 120_000 })
      await page.getByText("No hooks yet.").waitFor({ timeout: 120_000 })
      await page.getByText("Created").first().waitFor({ timeout: 120_000 })
      await page.getByText("No tenant is connected yet.").waitFor({ timeout: 120_000 })
      await page.getByText("No deliveries yet.").waitFor({ timeout: 120_000 })
      await page.getByText("No CRM pushes yet.").waitFor({ timeout: 120_000 })
      return [loaded, Date.now() - started] as const
    })
    load.push(loadMs)
    ready.push(readyMs)
    yield* Console.log(`round ${round}: baseline ${baseline[round - 1]} ms, page load ${loadMs} ms, all cards ${readyMs} ms`)
  }
  yield* Console.log(
    `\nmedians over ${rounds} rounds (cold browser profile each, launch excluded; load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}):\n` +
      `  baseline (a static file of the same listener): ${median(baseline)} ms\n` +
      `  first load, link → load event (redirect, page, bundle): ${median(load)} ms\n` +
      `  first load, link → all cards filled: ${median(ready)} ms`
  )
})

runMain(main)
