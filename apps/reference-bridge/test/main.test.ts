/**
 * The demo entry (`npm start`): prints its URLs, writes the CA PEM, serves,
 * and exits cleanly on SIGTERM.
 */
import { describe, expect, it } from "@effect/vitest"
import { Data, Effect, Schedule } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { call } from "./support/bridgeClient.js"
import { bodies } from "./support/fixtures.js"
import * as H from "./support/https.js"

class ChildFailed extends Data.TaggedError("ChildFailed")<{ readonly output: string }> {}

const PACKAGE_DIR = join(import.meta.dirname, "..")

/** Spawns `src/main.ts` with `args`; the child is killed when the scope closes. */
const start = (args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const output = { text: "" }
      child.stdout.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
      return { child, output }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
  )

const exitOf = (child: ChildProcess) =>
  Effect.async<number | null>((resume) => {
    if (child.exitCode !== null) return resume(Effect.succeed(child.exitCode))
    child.once("exit", (code) => resume(Effect.succeed(code)))
  })

const waitFor = (output: { text: string }, pattern: RegExp) =>
  Effect.suspend(() => {
    const match = pattern.exec(output.text)
    return match === null ? Effect.fail(new ChildFailed({ output: output.text })) : Effect.succeed(match)
  }).pipe(Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 150 }))

describe("npm start", () => {
  it.scopedLive("prints its URLs, writes the CA PEM, serves the tenant's API key, and stops cleanly on SIGTERM", () =>
    Effect.gen(function*() {
      const caFile = join(mkdtempSync(join(tmpdir(), "refbridge-")), "ca.pem")
      const { child, output } = yield* start(["--port", "0", "--api-key", "demo-key-123", `--ca-file=${caFile}`, "--tenant-id", "tenant-a"])
      const [, rest] = yield* waitFor(output, /rest: (https:\/\/127\.0\.0\.1:\d+\/crm)/)
      const [, mcpUrl] = yield* waitFor(output, /mcp: (https:\/\/\S+)/)
      const ca = readFileSync(caFile, "utf8")
      expect(ca).toContain("BEGIN CERTIFICATE")
      const agent = H.agent(ca)
      const bridge = { restBaseUrl: rest!, mcpUrl: mcpUrl! }
      const answer = yield* call("rest", bridge, agent, "capabilities", bodies.capabilities(), { credential: "demo-key-123" })
      expect(answer.status).toBe(200)
      expect((yield* call("mcp", bridge, agent, "capabilities", bodies.capabilities(), { credential: "demo-key-123" })).status).toBe(200)
      agent.destroy()
      child.kill("SIGTERM")
      expect(yield* exitOf(child)).toBe(0)
    }), { timeout: 30_000 })

  it.scopedLive("an unknown flag fails with the usage text", () =>
    Effect.gen(function*() {
      const { child, output } = yield* start(["--no-such-flag", "1"])
      expect(yield* exitOf(child)).toBe(1)
      expect(output.text).toContain("--api-key")
    }), { timeout: 30_000 })
})
