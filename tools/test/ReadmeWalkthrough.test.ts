/**
 * The README's walkthrough, run as written: the shell blocks of "Trying it with
 * the reference bridge" (docs/development.md) and of the README's "Running it",
 * in a fresh clone-like directory, with bash. One server serves both sections.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { cloneLike, ROOT, runScript, shBlocks, shellEnv } from "./support/Shell.js"

const README = Fs.readFileSync(Path.join(ROOT, "README.md"), "utf8")
const DEVELOPMENT = Fs.readFileSync(Path.join(ROOT, "docs", "development.md"), "utf8")

// The ports the README's walkthrough takes: the bridge, the public Event API, the internal API
// and the Integrations area (`npm start` serves all three listeners).
const PORTS = [8443, 8080, 8081, 8082]

const isFree = (port: number) =>
  Effect.async<boolean>((resume) => {
    const server = Net.createServer()
    server.once("error", () => resume(Effect.succeed(false)))
    server.listen(port, "127.0.0.1", () => server.close(() => resume(Effect.succeed(true))))
  })

describe("README walkthrough", () => {
  it.scopedLive("\"Trying it with the reference bridge\" by hand, then \"Running it\", pass as written on a fresh clone: the CA lands in ./.data, ends with a newline, and the bridge is connected", () =>
    Effect.gen(function*() {
      const walkthrough = shBlocks(DEVELOPMENT, "## Trying it with the reference bridge").filter((block) => block.trim() !== "npm run demo")
      const running = shBlocks(README, "## Running it")[0]
      expect(walkthrough).toHaveLength(1)
      expect(running).toContain("npx crm-relay accounts create")

      for (const port of PORTS) {
        if (!(yield* isFree(port))) expect.fail(`port ${port} (named by the README) is in use; stop what holds it and run again`)
      }
      const started = Date.now()
      const dir = yield* cloneLike("crm-relay-readme-")
      // After each line, a marker: a failure then shows how far the walkthrough got.
      const script = [walkthrough[0]!, "echo '--- walkthrough passed'", running!, "echo '--- running it passed'"].join("\n")
      const run = yield* runScript(script, dir, shellEnv())
      const output = run.output()
      expect(run.code, output).toBe(0)
      expect(output).toContain("--- walkthrough passed")
      expect(output).toContain("--- running it passed")
      // The capabilities check passed, twice (set, then test).
      expect(output.match(/capabilities check[^\n]* passed/g)?.length ?? 0, output).toBeGreaterThanOrEqual(2)
      // The subscription was created and the preview answered (the synthetic example: no deliveries yet).
      expect(output).toMatch(/\{"id":"[0-9a-f-]{36}"\}/)
      expect(output).toContain('[{"id":"sample-')

      // The CA is where docs/development.md says, relative to where npm was run, and a proper PEM file.
      const ca = Fs.readFileSync(Path.join(dir, ".data", "bridge-ca.pem"), "utf8")
      expect(ca).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n$/)
      expect(Fs.existsSync(Path.join(dir, ".data", "bridge-ca.key.pem"))).toBe(true)
      // ... and not inside the workspace folder npm ran the bridge in.
      const misplaced = Path.join(dir, "apps", "reference-bridge", ".data", "bridge-ca.pem")
      expect(Fs.existsSync(misplaced) && Fs.statSync(misplaced).mtimeMs >= started).toBe(false)
    }), { timeout: 900_000 })
})
