import { expect, layer } from "@effect/vitest"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Effect, Redacted, Schedule } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, PROCESS_TEST_TIMEOUT, type Run, serve, SERVE_START_BOUND } from "./support/Cli.js"
import * as CliBridge from "./support/CliBridge.js"
import { request } from "./support/TestServer.js"

const TENANT = { tenantId: "t-1", apiKey: "cli-key_visible~ASCII", clientId: "cli-client", clientSecret: "cli-client-secret!" } as const

const parse = <A>(text: string): A => JSON.parse(text.trim()) as A

/** The reference bridge serving the tenant, and the CLI's environment. */
const setup = CliBridge.setup("crm-relay-connections-cli-", [
  { tenantId: TENANT.tenantId, apiKey: TENANT.apiKey, oauth: { clientId: TENANT.clientId, clientSecret: TENANT.clientSecret } }
])

/** Asserts that no output of `runs` shows a bridge secret. */
const noSecrets = (runs: ReadonlyArray<Run>) => CliBridge.noSecrets(runs, [TENANT.apiKey, TENANT.clientSecret])

layer(TestDatabase.layer, { excludeTestServices: true })("crm-relay connections and master-key", (it) => {
  it.scoped("without a running server: connections set, connections test and master-key rotate work on the database directly", () =>
    Effect.gen(function*() {
      const { bridge, dataDir, db, env } = yield* setup
      const runs: Array<Run> = []
      const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}, stdin = "") =>
        Effect.tap(cli(args, { ...env, ...extra }, stdin), (r) => Effect.sync(() => runs.push(r)))

      const live = parse<{ id: string }>((yield* run(["accounts", "create", "--name", "Live", "--json"])).stdout).id
      const base = ["--account", live, "--tenant", TENANT.tenantId]

      // What the service does: connecting runs the capabilities check only.
      const set = yield* run(["connections", "set", ...base, "--transport", "rest", "--url", bridge.restBaseUrl, "--api-key", TENANT.apiKey, "--json"])
      expect(set.code, set.stderr).toBe(0)
      expect(parse<{ capabilities: { contract_version: string } }>(set.stdout).capabilities.contract_version).toBe("svc.crm.v1")
      const received = (yield* bridge.control.received).filter((r) => r.transport !== "oauth")
      expect(received.map((r) => r.operation)).toEqual(["capabilities"])
      if (db.kind === "pglite") {
        // Development: a master key was generated into DATA_DIR (mode 0600), loudly.
        expect(Fs.statSync(Path.join(dataDir, "master-key")).mode & 0o777).toBe(0o600)
        expect(set.stderr).toContain("MASTER_KEY was not set")
      }

      const test = yield* run(["connections", "test", ...base, "--json"])
      expect(test.code, test.stderr).toBe(0)
      const rotate = yield* run(["master-key", "rotate", "--json"])
      expect(rotate.code, rotate.stderr).toBe(0)
      const report = parse<{ resealed: number; undecryptable: Array<string> }>(rotate.stdout)
      expect(report.resealed).toBeGreaterThanOrEqual(1)
      expect(report.undecryptable).toEqual([])
      // With --json, scripts read one JSON line: no progress on stderr.
      expect(rotate.stderr).not.toContain("Re-encrypting secrets")
      // Long work shows progress: plain lines off a terminal (a line per tenth of the way, and the end), then the count.
      const shown = yield* run(["master-key", "rotate"])
      expect(shown.code, shown.stderr).toBe(0)
      const total = report.resealed
      expect(shown.stderr).toContain(`Re-encrypting secrets: 0/${total}\n`)
      expect(shown.stderr).toContain(`Re-encrypting secrets: ${total}/${total}\n`)
      expect(shown.stdout).toContain(`re-encrypted ${total} secret(s)`)
      // Rotation keeps every connection working.
      expect((yield* run(["connections", "test", ...base])).code).toBe(0)

      if (db.kind === "postgres") {
        // A generated key on one replica would not be shared: refused, saying what to do.
        const { MASTER_KEY: _, ...withoutKey } = env
        const missing = yield* cli(["connections", "test", ...base], withoutKey)
        expect(missing.code, missing.stderr).toBe(2)
        expect(missing.stderr).toContain("MASTER_KEY must be set when DATABASE_URL is")
      }
      noSecrets(runs)
    }), { timeout: PROCESS_TEST_TIMEOUT })

  it.scoped("a failed capabilities check names its cause and the next step once: a refused port says so, not \"The connection to the bridge failed.\"", () =>
    Effect.gen(function*() {
      const { env } = yield* setup
      const live = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "Refused", "--json"], env)).stdout).id
      const refused = yield* cli(
        ["connections", "set", "--account", live, "--tenant", TENANT.tenantId, "--transport", "rest", "--url", "https://127.0.0.1:1/crm", "--api-key", TENANT.apiKey],
        env
      )
      expect(refused.code, refused.stderr).toBe(1)
      expect(refused.stderr).toContain("The bridge at 127.0.0.1:1 refused the connection (ECONNREFUSED)")
      expect(refused.stderr).toContain("Check that the bridge is running and that the URL names its port. Nothing was stored.")
      expect(refused.stderr).not.toContain("try again later")
      expect(refused.stderr).not.toContain(TENANT.apiKey)
    }), { timeout: 300_000 })

  it.scoped("with a running server: connections set (flag, environment or stdin secret) and master-key rotate go through it (embedded database) or share PostgreSQL with it; refusals name the flag; its in-call API keeps working after the rotation, with no restart", () =>
    Effect.gen(function*() {
      const setUp = yield* setup
      const { bridge, dataDir, db } = setUp
      const env = { ...setUp.env, ADMIN_TOKEN: "cli-test-admin-token-0123" }
      const server = yield* serve({ ...env, PORT: "0", ADMIN_PORT: "0" })
      const info = yield* ServerFile.running(dataDir).pipe(
        Effect.flatMap(Effect.orElseFail(() => "not yet")),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
        Effect.orElse(() => Effect.dieMessage(`the server did not start: ${server.stderr()}`))
      )
      const runs: Array<Run> = []
      const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}, stdin = "") =>
        Effect.tap(cli(args, { ...env, ...extra }, stdin), (r) => Effect.sync(() => runs.push(r)))
      const live = parse<{ id: string }>((yield* run(["accounts", "create", "--name", "Live", "--json"])).stdout).id
      const demo = parse<{ id: string }>((yield* run(["accounts", "create", "--name", "Demo", "--mode", "demo", "--json"])).stdout).id
      const base = ["--account", live, "--tenant", TENANT.tenantId]
      // The key from the environment, then the OAuth client secret from standard input: out of the shell history.
      const fromEnv = yield* run(["connections", "set", ...base, "--transport", "mcp", "--url", bridge.mcpUrl], {
        CONNECTION_API_KEY: TENANT.apiKey
      })
      expect([fromEnv.code, fromEnv.stdout]).toEqual([0, expect.stringContaining(`Connected tenant ${TENANT.tenantId} of account ${live} over mcp`)])
      const fromStdin = yield* run(
        ["connections", "set", ...base, "--transport", "rest", "--url", bridge.restBaseUrl, "--token-url", bridge.tokenUrl, "--client-id", TENANT.clientId, "--client-secret", "-"],
        {},
        `${TENANT.clientSecret}\n`
      )
      expect(fromStdin.code, fromStdin.stderr).toBe(0)

      // Refusals name the flag to fix, store nothing, and exit 2.
      const badUrl = yield* run(["connections", "set", ...base, "--transport", "rest", "--url", bridge.restBaseUrl.replace("https:", "http:"), "--api-key", TENANT.apiKey])
      expect(badUrl.code, badUrl.stderr).toBe(2)
      expect(badUrl.stderr).toContain("--url: The bridge URL must use https.")
      const noCredential = yield* run(["connections", "set", ...base, "--transport", "rest", "--url", bridge.restBaseUrl])
      expect(noCredential.code, noCredential.stderr).toBe(2)
      expect(noCredential.stderr).toContain("Give --api-key (or CONNECTION_API_KEY")
      const before = (yield* bridge.control.received).length
      const refused = yield* run(["connections", "set", "--account", demo, "--tenant", TENANT.tenantId, "--transport", "rest", "--url", bridge.restBaseUrl, "--api-key", TENANT.apiKey])
      expect(refused.code, refused.stderr).toBe(2)
      expect(refused.stderr).toContain("Demo and sandbox accounts cannot connect a bridge to a real CRM; this account's mode is demo.")
      expect((yield* bridge.control.received).length).toBe(before)

      const set = yield* run([
        "connections", "set", "--account", live, "--tenant", TENANT.tenantId, "--transport", "mcp", "--url", bridge.mcpUrl,
        "--token-url", bridge.tokenUrl, "--client-id", TENANT.clientId, "--client-secret", TENANT.clientSecret
      ])
      expect(set.code, set.stderr).toBe(0)
      if (db.kind === "postgres") {
        // A replica with another MASTER_KEY than the one the stored keys are wrapped under refuses to start.
        const wrong = yield* cli(["serve"], { ...env, PORT: "0", ADMIN_PORT: "0", PORTAL_PORT: "0", MASTER_KEY: Redacted.value(Vault.generateMasterKey()) })
        expect(wrong.code, wrong.stderr).toBe(1)
        expect(wrong.stderr).toContain("set MASTER_KEY (or MASTER_KEY_PREVIOUS) to the key it was created with")
      }
      const inCall = (path: string, body: unknown) =>
        request("POST", `${info.adminUrl}/v1/accounts/${live}/tenants/${TENANT.tenantId}/${path}`, {
          headers: { authorization: "Bearer cli-test-admin-token-0123", "content-type": "application/json" },
          body: JSON.stringify(body)
        })
      expect((yield* inCall("contacts/search", { phone: "+1 555 010 0042" })).json).toEqual({ ok: true, contact: null })

      const rotate = yield* run(["master-key", "rotate", "--json"])
      expect(rotate.code, rotate.stderr).toBe(0)
      expect(parse<{ resealed: number }>(rotate.stdout).resealed).toBeGreaterThanOrEqual(1)
      const upsert = yield* inCall("contacts/upsert", {
        contact: {
          full_name: "Ada", first_name: "Ada", last_name: "", address: "", source: "", call_id: "",
          phones: ["+1 555 010 0042"], emails: [], tags: []
        }
      })
      expect([upsert.status, (upsert.json as { ok: boolean }).ok]).toEqual([200, true])
      expect((yield* run(["connections", "test", "--account", live, "--tenant", TENANT.tenantId])).code).toBe(0)
      noSecrets([...runs, { code: 0, stdout: server.stdout(), stderr: server.stderr() }])
      expect(yield* server.terminate).toBe(0)
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
