/**
 * The set-up of CLI tests that talk to a bridge: the reference bridge on
 * 127.0.0.1 (a name the child's system resolver needs no help with), its CA
 * in a file the child trusts, and the child's environment for the database
 * of the context.
 */
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { TestDatabase, Vault } from "@crm-relay/store"
import { expect } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Run } from "./Cli.js"
import { tempDir } from "./TempDir.js"

/** The MASTER_KEY of the tests on PostgreSQL: one database, one key. */
const MASTER_KEY = Redacted.value(Vault.generateMasterKey())

/** A bridge serving `tenants`, a temporary directory (`dir`, with `dataDir` in it) and the CLI's `env`. */
export const setup = (prefix: string, tenants: ReferenceBridge.ReferenceBridgeOptions["tenants"]) =>
  Effect.gen(function*() {
    const db = yield* TestDatabase.TestDatabase
    const dir = yield* tempDir(prefix)
    const bridge = yield* Effect.orDie(ReferenceBridge.make({ urlHost: "127.0.0.1", tenants }))
    const caFile = Path.join(dir, "bridge-ca.pem")
    Fs.writeFileSync(caFile, bridge.ca)
    const dataDir = Path.join(dir, "data")
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      LOG_LEVEL: "Warning",
      EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
      NODE_EXTRA_CA_CERTS: caFile
    }
    if (Option.isSome(db.url)) {
      env["DATABASE_URL"] = Redacted.value(db.url.value)
      env["MASTER_KEY"] = MASTER_KEY
    }
    return { bridge, db, dir, dataDir, env }
  })

/** Asserts that no output of `runs` shows any of `secrets`. */
export const noSecrets = (runs: ReadonlyArray<Run>, secrets: ReadonlyArray<string>) => {
  const output = runs.map((r) => `${r.stdout}\n${r.stderr}`).join("\n")
  for (const secret of secrets) expect(output).not.toContain(secret)
}
