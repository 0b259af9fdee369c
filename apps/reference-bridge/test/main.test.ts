/**
 * The demo entry (`npm start`): prints its URLs, writes the CA PEM, serves,
 * and exits cleanly on SIGTERM.
 */
import { describe, expect, it } from "@effect/vitest"
import { Data, Duration, Effect } from "effect"
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

/**
 * Bounds against a hang, never a measure of speed: the child loads tsx and the bridge, which takes
 * seconds on a quiet machine and many times that on a loaded one.
 */
const START_BOUND = Duration.minutes(10)
const PROCESS_TEST_TIMEOUT = 1_800_000

/** The first match of `pattern` in the child's output, as soon as it is printed; fails if the child exits first. */
const waitFor = (child: ChildProcess, output: { text: string }, pattern: RegExp) =>
  Effect.async<RegExpExecArray, ChildFailed>((resume) => {
    const check = () => {
      const match = pattern.exec(output.text)
      if (match !== null) done(Effect.succeed(match))
      else if (child.exitCode !== null || child.signalCode !== null) done(Effect.fail(new ChildFailed({ output: output.text })))
    }
    const done = (result: Effect.Effect<RegExpExecArray, ChildFailed>) => {
      stop()
      resume(result)
    }
    const stop = () => {
      child.stdout?.off("data", check)
      child.stderr?.off("data", check)
      child.off("exit", check)
    }
    child.stdout?.on("data", check)
    child.stderr?.on("data", check)
    child.on("exit", check)
    check()
    return Effect.sync(stop)
  }).pipe(
    Effect.timeoutFail({ duration: START_BOUND, onTimeout: () => new ChildFailed({ output: output.text }) })
  )

describe("npm start", () => {
  it.scopedLive("prints its URLs, writes the CA PEM, serves the tenant's API key, and stops cleanly on SIGTERM", () =>
    Effect.gen(function*() {
      const caFile = join(mkdtempSync(join(tmpdir(), "refbridge-")), "ca.pem")
      const { child, output } = yield* start(["--port", "0", "--api-key", "demo-key-123", `--ca-file=${caFile}`, "--tenant-id", "tenant-a"])
      const [, rest] = yield* waitFor(child, output, /rest: (https:\/\/127\.0\.0\.1:\d+\/crm)/)
      const [, mcpUrl] = yield* waitFor(child, output, /mcp: (https:\/\/\S+)/)
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
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.scopedLive("an unknown flag fails with the usage text", () =>
    Effect.gen(function*() {
      const { child, output } = yield* start(["--no-such-flag", "1"])
      expect(yield* exitOf(child)).toBe(1)
      expect(output.text).toContain("--api-key")
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
