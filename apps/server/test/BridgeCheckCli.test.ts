import { expect, layer } from "@effect/vitest"
import { Faults } from "@crm-relay/reference-bridge"
import { TestDatabase } from "@crm-relay/store"
import { Effect, Schedule } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, type Run, serve, SERVE_START_BOUND } from "./support/Cli.js"
import * as CliBridge from "./support/CliBridge.js"

const TENANT = { tenantId: "t-1", apiKey: "check-key_visible~ASCII", clientId: "check-client", clientSecret: "check-client-secret!" } as const
const OTHER = { tenantId: "t-2", apiKey: "check-other-key" } as const

interface Report {
  readonly passed: boolean
  readonly earned_level: string
  readonly checks: ReadonlyArray<{ readonly id: string; readonly status: string }>
}

/** The reference bridge serving both tenants, and the CLI's environment. */
const setup = CliBridge.setup("crm-relay-bridge-check-", [
  { tenantId: TENANT.tenantId, apiKey: TENANT.apiKey, oauth: { clientId: TENANT.clientId, clientSecret: TENANT.clientSecret } },
  { tenantId: OTHER.tenantId, apiKey: OTHER.apiKey }
])

const noSecrets = (runs: ReadonlyArray<Run>) => CliBridge.noSecrets(runs, [TENANT.apiKey, TENANT.clientSecret, OTHER.apiKey])

layer(TestDatabase.layer, { excludeTestServices: true })("crm-relay bridge check", (it) => {
  it.scoped("flags, --json, --junit, a failing bridge, usage mistakes and a stored connection: exit 0, 1 and 2 as documented", () =>
    Effect.gen(function*() {
      const { bridge, dir, env } = yield* setup
      const runs: Array<Run> = []
      const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}, stdin = "") =>
        Effect.tap(cli(args, { ...env, ...extra }, stdin), (r) => Effect.sync(() => runs.push(r)))
      const rest = ["bridge", "check", "--tenant", TENANT.tenantId, "--transport", "rest", "--url", bridge.restBaseUrl]

      // The read-only level against the reference bridge, with tenant binding: the terminal report and JUnit.
      const junit = Path.join(dir, "report.xml")
      const text = yield* run([...rest, "--api-key", TENANT.apiKey, "--other-tenant", OTHER.tenantId, "--junit", junit], {
        OTHER_TENANT_API_KEY: OTHER.apiKey
      })
      expect(text.code, text.stderr).toBe(0)
      expect(text.stdout).toContain(`svc.crm.v1 conformance check of rest ${bridge.restBaseUrl} (tenant t-1, API key)`)
      expect(text.stdout).toContain("PASS  auth.tenant_binding")
      expect(text.stdout).toContain("Verdict: PASSED — the bridge earns the read-only level (asked: read-only)")
      const xml = Fs.readFileSync(junit, "utf8")
      expect(xml).toContain(`<testcase classname="svc.crm.v1.read-only" name="capabilities.version"`)
      expect(xml).toContain(`failures="0"`)
      const records = yield* bridge.control.records
      expect([records.contacts.length, records.leads.length, records.appointments.length]).toEqual([0, 0, 0])

      // The write level over MCP with OAuth (the client secret from standard input), as JSON.
      const writes = yield* run(
        ["bridge", "check", "--tenant", TENANT.tenantId, "--transport", "mcp", "--url", bridge.mcpUrl, "--token-url", bridge.tokenUrl, "--client-id", TENANT.clientId, "--client-secret", "-", "--writes", "--json"],
        {},
        `${TENANT.clientSecret}\n`
      )
      expect(writes.code, writes.stderr).toBe(0)
      expect(JSON.parse(writes.stdout) as Report).toMatchObject({ passed: true, earned_level: "writes" })

      // A faulty bridge: the check that names the fault fails, the command exits 1.
      yield* bridge.control.setFault(Faults.invalidReceipt("invented_match"), { operation: "contacts.search", times: "always" })
      const faulty = yield* run([...rest, "--api-key", TENANT.apiKey])
      expect(faulty.code, faulty.stderr).toBe(1)
      expect(faulty.stdout).toContain("FAIL  contacts.search.no_invented_match")
      expect(faulty.stdout).toContain("hint: Answer {\"contact\": null} when no contact has the phone or email")
      expect(faulty.stderr).toContain("The bridge did not pass the read-only level: 1 check(s) failed")
      yield* bridge.control.clearFaults

      // Answers without isError, as the official MCP SDK gives them: a WARN with its hint, and still exit 0.
      yield* bridge.control.setFault(Faults.mcpOmitsIsError(), { transport: "mcp", times: "always" })
      const warnJunit = Path.join(dir, "warn.xml")
      const warned = yield* run(
        ["bridge", "check", "--tenant", TENANT.tenantId, "--transport", "mcp", "--url", bridge.mcpUrl, "--api-key", TENANT.apiKey, "--junit", warnJunit]
      )
      expect(warned.code, warned.stderr).toBe(0)
      expect(warned.stdout).toContain("WARN  mcp.tool_result")
      expect(warned.stdout).toContain("hint: Nothing to fix for crm-relay; to meet the contract's wording, send isError: false explicitly")
      expect(warned.stdout).toMatch(/Verdict: PASSED — the bridge earns the read-only level \(asked: read-only\); \d+ passed, 1 warned \(not failures\), 0 failed/)
      const warnXml = Fs.readFileSync(warnJunit, "utf8")
      expect(warnXml).toContain(`failures="0"`)
      expect(warnXml).toContain("<system-out>WARN: ")
      yield* bridge.control.clearFaults

      // Usage mistakes: exit 2, nothing sent.
      const before = (yield* bridge.control.received).length
      const noUrl = yield* run(["bridge", "check", "--tenant", TENANT.tenantId, "--api-key", TENANT.apiKey])
      expect([noUrl.code, noUrl.stderr]).toEqual([2, expect.stringContaining("Give --transport and --url")])
      const noKey = yield* run(rest)
      expect([noKey.code, noKey.stderr]).toEqual([2, expect.stringContaining("Give --api-key")])
      const httpUrl = yield* run([...rest.slice(0, -1), bridge.restBaseUrl.replace("https:", "http:"), "--api-key", TENANT.apiKey])
      expect([httpUrl.code, httpUrl.stderr]).toEqual([2, expect.stringContaining("--url: The bridge URL must use https.")])
      const lonelyOther = yield* run([...rest, "--api-key", TENANT.apiKey, "--other-tenant-api-key", OTHER.apiKey])
      expect([lonelyOther.code, lonelyOther.stderr]).toEqual([2, expect.stringContaining("need --other-tenant")])
      expect((yield* bridge.control.received).length).toBe(before)

      // A stored connection: connections set, then bridge check --account --tenant.
      const account = (JSON.parse((yield* run(["accounts", "create", "--name", "Check", "--json"])).stdout) as { id: string }).id
      const set = yield* run(["connections", "set", "--account", account, "--tenant", TENANT.tenantId, "--transport", "rest", "--url", bridge.restBaseUrl, "--api-key", TENANT.apiKey])
      expect(set.code, set.stderr).toBe(0)
      const stored = yield* run(["bridge", "check", "--account", account, "--tenant", TENANT.tenantId, "--json"])
      expect(stored.code, stored.stderr).toBe(0)
      expect(JSON.parse(stored.stdout) as Report).toMatchObject({ passed: true, earned_level: "read-only" })
      const mixed = yield* run(["bridge", "check", "--account", account, "--tenant", TENANT.tenantId, "--url", bridge.restBaseUrl])
      expect([mixed.code, mixed.stderr]).toEqual([2, expect.stringContaining("With --account the stored connection is checked")])
      noSecrets(runs)
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.scoped("with a running server: bridge check --account --tenant runs on the stored connection through it (embedded database) or beside it (PostgreSQL)", () =>
    Effect.gen(function*() {
      const setUp = yield* setup
      const env: Record<string, string> = { ...setUp.env, ADMIN_TOKEN: "bridge-check-admin-token-01" }
      const server = yield* serve({ ...env, PORT: "0", ADMIN_PORT: "0" })
      yield* ServerFile.running(env["DATA_DIR"]!).pipe(
        Effect.flatMap(Effect.orElseFail(() => "not yet")),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
        Effect.orElse(() => Effect.dieMessage(`the server did not start: ${server.stderr()}`))
      )
      const runs: Array<Run> = []
      const run = (args: ReadonlyArray<string>) => Effect.tap(cli(args, env), (r) => Effect.sync(() => runs.push(r)))
      const account = (JSON.parse((yield* run(["accounts", "create", "--name", "Served", "--json"])).stdout) as { id: string }).id
      const set = yield* run(["connections", "set", "--account", account, "--tenant", TENANT.tenantId, "--transport", "mcp", "--url", setUp.bridge.mcpUrl, "--api-key", TENANT.apiKey])
      expect(set.code, set.stderr).toBe(0)
      const stored = yield* run(["bridge", "check", "--account", account, "--tenant", TENANT.tenantId, "--writes", "--junit", Path.join(setUp.dir, "served.xml")])
      expect(stored.code, stored.stderr).toBe(0)
      expect(stored.stdout).toContain("Verdict: PASSED — the bridge earns the writes level (asked: writes)")
      expect(Fs.readFileSync(Path.join(setUp.dir, "served.xml"), "utf8")).toContain(`name="appointments.create.conflict"`)
      const unknown = yield* run(["bridge", "check", "--account", account, "--tenant", "t-unknown"])
      expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringContaining("Tenant t-unknown has no bridge connection; set one first.")])
      noSecrets([...runs, { code: 0, stdout: server.stdout(), stderr: server.stderr() }])
      expect(yield* server.terminate).toBe(0)
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
