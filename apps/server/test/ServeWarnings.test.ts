/**
 * An operator starting `crm-relay serve` reads its stderr: the built binary,
 * on the suite's database (PostgreSQL with DATABASE_URL, where the driver's
 * deprecations live; embedded otherwise), prints no runtime warning while its
 * job runners start listening. pg 8 warns when a query is queued behind
 * another on one client (two LISTENs at once on the shared listen connection),
 * which pg 9 refuses outright.
 */
import { describe, expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { Eventually } from "@crm-relay/testing"
import { Effect, Option, Redacted, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"
import { request } from "./support/TestServer.js"

/** One MASTER_KEY for the whole file: on PostgreSQL its tests share one database, whose integration keys' tag secret is sealed under the key that created it. */
const FILE_MASTER_KEY = randomBytes(32).toString("base64")

/** The job runners `serve` starts (ROLE=all), each named in its log lines. */
const WORKERS = ["crm-push", "webhook-delivery", "subscription-recovery"] as const

/** Workers whose runner has logged that its LISTEN is in effect. */
const listeningWorkers = (stdout: string): Set<string> => {
  const found = new Set<string>()
  for (const line of stdout.split("\n")) {
    if (!line.includes("\"Job notifications listening\"")) continue
    const worker = /"worker":"([^"]+)"/.exec(line)?.[1]
    if (worker !== undefined) found.add(worker)
  }
  return found
}

describe("crm-relay serve's stderr", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })("the built binary", (it) => {
    it.scoped("an operator starting serve sees no DeprecationWarning (nor any other Node warning) once every job runner listens", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase.TestDatabase
        const dataDir = Path.join(yield* tempDir("crm-relay-serve-warnings-"), "data")
        const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Debug" }
        if (Option.isSome(db.url)) {
          env["DATABASE_URL"] = Redacted.value(db.url.value)
          env["MASTER_KEY"] = FILE_MASTER_KEY
        }
        const server = yield* serve(env)
        const info = yield* ServerFile.running(dataDir).pipe(
          Effect.flatMap(Effect.orElseFail(() => "not yet")),
          Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(SERVE_START_BOUND))),
          Effect.orDie
        )
        expect((yield* request("GET", `${info.publicUrl}/perform-list`)).status).toBe(401)
        // The LISTENs are what start together; once each runner has one in effect, start-up is over.
        yield* Eventually.eventually(Effect.sync(() => WORKERS.every((worker) => listeningWorkers(server.stdout()).has(worker))))
        expect(yield* server.terminate).toBe(0)
        expect(server.stderr()).not.toContain("DeprecationWarning")
        expect(server.stderr()).not.toMatch(/\(node:\d+\) \w*Warning/)
      }), PROCESS_TEST_TIMEOUT)
  })
})
