import { expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { randomBytes } from "node:crypto"
import { Effect, Option, Redacted } from "effect"
import * as Path from "node:path"
import { cli, PROCESS_TEST_TIMEOUT } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"

/** One MASTER_KEY for the whole file: on PostgreSQL its tests share one database, whose integration keys' tag secret is sealed under the key that created it. */
const FILE_MASTER_KEY = randomBytes(32).toString("base64")

/** A fresh DATA_DIR (and the test schema on PostgreSQL), links pointing at a public HTTPS address. */
const environment = Effect.gen(function*() {
  const db = yield* TestDatabase.TestDatabase
  const dataDir = Path.join(yield* tempDir("crm-relay-portal-cli-"), "data")
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning", PORTAL_PUBLIC_URL: "https://integrations.example.com/" }
  if (Option.isSome(db.url)) {
    env["DATABASE_URL"] = Redacted.value(db.url.value)
    env["MASTER_KEY"] = FILE_MASTER_KEY
  }
  return env
})

layer(TestDatabase.layer, { excludeTestServices: true })("crm-relay portal link", (it) => {
  it.scoped("mints a single-use link to the account's Integrations area under PORTAL_PUBLIC_URL, valid 10 minutes; an unknown account is refused (exit 2)", () =>
    Effect.gen(function*() {
      const env = yield* environment
      const created = yield* cli(["accounts", "create", "--name", "Acme Plumbing", "--json"], env)
      const account = (JSON.parse(created.stdout) as { id: string }).id

      const minted = yield* cli(["portal", "link", "--account", account, "--json"], env)
      expect(minted.code, minted.stderr).toBe(0)
      const link = JSON.parse(minted.stdout) as { url: string; expires_at: string }
      expect(link.url).toMatch(/^https:\/\/integrations\.example\.com\/enter\?token=[A-Za-z0-9_-]{43}$/)
      const ttl = new Date(link.expires_at).getTime() - Date.now()
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(10 * 60_000)

      const text = yield* cli(["portal", "link", "--account", account], env)
      expect(text.stdout).toContain("it opens once")
      expect(text.stdout).not.toContain(link.url)

      const unknown = yield* cli(["portal", "link", "--account", "0f8fad5b-d9cb-469f-a165-70867728950e"], env)
      expect(unknown.code, unknown.stderr).toBe(2)
      expect(unknown.stderr).toContain("No account with id 0f8fad5b-d9cb-469f-a165-70867728950e exists.")
    }), { timeout: PROCESS_TEST_TIMEOUT })
})
