/**
 * The command line bridge's CA survives restarts, and `npm start -w` paths
 * mean the directory npm was run from.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Data, Effect, Option, Schedule } from "effect"
import { spawn } from "node:child_process"
import { X509Certificate } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as CaFiles from "../src/CaFiles.js"
import { call } from "./support/bridgeClient.js"
import { bodies } from "./support/fixtures.js"
import * as H from "./support/https.js"

const PACKAGE_DIR = join(import.meta.dirname, "..")
const PEM = /^-----BEGIN [A-Z ]+-----\n[\s\S]+\n-----END [A-Z ]+-----\n$/

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "refbridge-ca-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

class NotYet extends Data.TaggedError("NotYet")<{ readonly output: string }> {}

/** `npm start`'s entry, run from the package folder (as `npm start -w` does) with `env`; killed with the scope. */
const startMain = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, NO_COLOR: "1", ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const output = { text: "" }
      child.stdout.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output.text += chunk.toString()))
      return { child, output }
    }),
    ({ child }) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGTERM")
      })
  )

// Waits on the condition; the bound only guards against a hang on a busy machine.
const restUrl = (output: { text: string }) =>
  Effect.suspend(() => {
    const match = /rest: (https:\/\/127\.0\.0\.1:\d+\/crm)/.exec(output.text)
    return match === null ? Effect.fail(new NotYet({ output: output.text })) : Effect.succeed(match[1]!)
  }).pipe(Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 600 }))

describe("the reference bridge's CA files", () => {
  it.scoped("a second start reuses the CA certificate and key; the files end with a newline and the key is private", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const paths = { cert: join(dir, "ca.pem"), key: CaFiles.keyPathOf(join(dir, "ca.pem")) }
      expect(paths.key).toBe(join(dir, "ca.key.pem"))
      const first = yield* CaFiles.loadOrCreate(paths)
      expect(first.reused).toBe(false)
      expect(readFileSync(paths.cert, "utf8")).toMatch(PEM)
      expect(readFileSync(paths.key, "utf8")).toMatch(PEM)
      expect(statSync(paths.key).mode & 0o777).toBe(0o600)
      expect(new X509Certificate(first.ca.cert).ca).toBe(true)
      const second = yield* CaFiles.loadOrCreate(paths)
      expect(second.reused).toBe(true)
      expect(second.ca).toEqual(first.ca)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("unusable files (a key of another CA, or not PEM) are replaced, and the reason is given", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const a = { cert: join(dir, "a.pem"), key: join(dir, "a.key.pem") }
      const b = { cert: join(dir, "b.pem"), key: join(dir, "b.key.pem") }
      yield* CaFiles.loadOrCreate(a)
      const other = yield* CaFiles.loadOrCreate(b)
      writeFileSync(a.key, other.ca.key)
      const mismatched = yield* CaFiles.loadOrCreate(a)
      expect(mismatched.reused).toBe(false)
      expect(mismatched.replaced).toEqual(Option.some("the key does not belong to the certificate"))
      writeFileSync(a.cert, "not a certificate")
      expect((yield* CaFiles.loadOrCreate(a)).replaced).toEqual(Option.some("the files are not a PEM certificate and key"))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("npm start -w: a relative --ca-file lands under INIT_CWD (where npm was run), and a restarted bridge is trusted with the CA file of the first start", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const args = ["--port", "0", "--api-key", "demo-key-123", "--tenant-id", "tenant-a", "--ca-file", ".data/bridge-ca.pem"]
      const caFile = join(dir, ".data", "bridge-ca.pem")
      const firstCa = yield* Effect.scoped(Effect.gen(function*() {
        const { output } = yield* startMain(args, { INIT_CWD: dir })
        yield* restUrl(output)
        expect(existsSync(join(PACKAGE_DIR, ".data", "bridge-ca.pem")) && statSync(join(PACKAGE_DIR, ".data", "bridge-ca.pem")).mtimeMs > Date.now() - 600_000).toBe(false)
        return readFileSync(caFile, "utf8")
      }))
      expect(firstCa).toMatch(PEM)
      expect(existsSync(join(dir, ".data", "bridge-ca.key.pem"))).toBe(true)

      // Restarted: the CA file a server read at the first start still verifies the new server certificate.
      const { output } = yield* startMain(args, { INIT_CWD: dir })
      const rest = yield* restUrl(output)
      expect(readFileSync(caFile, "utf8")).toBe(firstCa)
      const agent = H.agent(firstCa)
      const answer = yield* call("rest", { restBaseUrl: rest, mcpUrl: rest.replace(/\/crm$/, "/mcp") }, agent, "capabilities", bodies.capabilities(), {
        credential: "demo-key-123"
      })
      agent.destroy()
      expect(answer.status).toBe(200)
    }), { timeout: 300_000 })
})
