/**
 * The setup a run against a real `crm-relay serve` shares: PostgreSQL from
 * DATABASE_URL (a fresh schema), one loopback certificate for its receivers
 * and bridges with its CA in a file the server trusts (NODE_EXTRA_CA_CERTS),
 * and the server settings that let its egress reach 127.0.0.1.
 */
import { Certificate } from "@crm-relay/testing"
import { Config, Data, Effect, Option, type Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { freshSchema } from "./BenchDatabase.js"
import type { JsonRequest } from "./Http.js"
import type { RunningServer } from "./ServerProcess.js"

/** DATABASE_URL is not set: this run needs real PostgreSQL. */
export class NoDatabase extends Data.TaggedError("NoDatabase")<{ readonly message: string }> {}

/** What a loopback run has ready: its database, certificate and the server's environment for them. */
export interface LoopbackRun {
  readonly database: { readonly url: Redacted.Redacted; readonly version: string }
  readonly tls: Certificate.TlsMaterial
  /** ROLE-independent settings: egress to 127.0.0.1, trusting the run's CA. */
  readonly serverEnv: Record<string, string>
}

/**
 * The run's loopback certificate, and the server settings that let its egress reach 127.0.0.1 and trust
 * that certificate (its CA in a file of a temporary folder prefixed `name`, removed with the scope).
 */
export const loopbackEgress = (name: string) =>
  Effect.gen(function*() {
    const tls = yield* Effect.orDie(Certificate.generateTlsMaterial())
    const runDir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), `crm-relay-${name}-`))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const caFile = Path.join(runDir, "loopback-ca.pem")
    Fs.writeFileSync(caFile, tls.ca)
    return { tls, serverEnv: { EGRESS_ALLOW_PRIVATE: "127.0.0.1/32", NODE_EXTRA_CA_CERTS: caFile } }
  })

/** Prepares a run named `name` (the temporary folder's prefix) for the scope. */
export const prepare = (name: string) =>
  Effect.gen(function*() {
    const base = yield* Config.option(Config.redacted("DATABASE_URL")).pipe(Effect.orDie)
    if (Option.isNone(base)) {
      return yield* new NoDatabase({ message: `Set DATABASE_URL to a PostgreSQL database: ${name} runs on real PostgreSQL.` })
    }
    const database = yield* freshSchema(base.value)
    const { serverEnv, tls } = yield* loopbackEgress(name)
    return { database, tls, serverEnv } satisfies LoopbackRun
  })

/** A live account with an integration key, through the server's internal API: its id and key. */
export const liveAccount = (call: JsonRequest, server: RunningServer, adminToken: string, name: string) =>
  Effect.gen(function*() {
    const created = yield* call("POST", `${server.adminUrl}/v1/accounts`, adminToken, { name, mode: "live" })
    const id = String(created["id"])
    const key = yield* call("POST", `${server.adminUrl}/v1/accounts/${id}/keys`, adminToken)
    return { id, key: String(key["key"]) }
  })

/** Subscribes `targetUrl` to the account's lead events, as an automation platform does (Event API). */
export const subscribeLeads = (call: JsonRequest, server: RunningServer, key: string, targetUrl: string) =>
  call("POST", `${server.publicUrl}/subscribe`, key, { targetUrl, event: "lead" })

/**
 * Hooks one key subscribes at most: the Event API allows a key 60 requests a minute, so a bench that
 * subscribes many hooks spreads them over fresh keys and never meets the 429.
 */
const SUBSCRIBES_PER_KEY = 50

/**
 * Subscribes `count` more lead hooks for the account, hook i to `targets[i % targets.length]`, through
 * the Event API (`concurrency` at a time) with fresh keys of the account (internal API), as many as the
 * per-key rate limit asks. The server's MAX_SUBSCRIPTIONS_PER_ACCOUNT must allow them.
 */
export const subscribeMany = (
  call: JsonRequest,
  server: RunningServer,
  adminToken: string,
  accountId: string,
  count: number,
  targets: ReadonlyArray<string>,
  concurrency = 8
) =>
  Effect.gen(function*() {
    const keys = yield* Effect.forEach(
      Array.from({ length: Math.ceil(count / SUBSCRIBES_PER_KEY) }, () => undefined),
      () => Effect.map(call("POST", `${server.adminUrl}/v1/accounts/${accountId}/keys`, adminToken), (k) => String(k["key"])),
      { concurrency }
    )
    yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      (i) => subscribeLeads(call, server, keys[Math.floor(i / SUBSCRIBES_PER_KEY)]!, targets[i % targets.length]!),
      { concurrency, discard: true }
    )
  })

/** Load average, as the benches print it. */
export const loadAverage = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")
