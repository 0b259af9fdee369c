/**
 * Issue 41, "Bad input, each refused at start with a sentence and nothing
 * written": `crm-relay serve` (the real binary) with a DATABASE_URL in
 * libpq's multi-host form, and with one that reaches a real standby (a
 * throwaway primary and its `pg_basebackup -R` standby). PostgreSQL only
 * (vitest.config.ts runs this file when DATABASE_URL is set).
 */
import { describe, expect, it } from "@effect/vitest"
import { PostgresStandby } from "@crm-relay/testing"
import { Database, Vault } from "@crm-relay/store"
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Effect, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { cli, PROCESS_TEST_TIMEOUT } from "./support/Cli.js"

/** Runs `statement` on the database of `url`, through the store's own client. */
const on = (url: string, statement: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<any>, unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, statement).pipe(
    Effect.provide(Database.layerPostgres({ url: Redacted.make(url), poolSize: 1 })),
    Effect.orDie
  )

/** Tables outside PostgreSQL's own schemas: none in a database nothing was written to. */
const tablesIn = (url: string) =>
  Effect.map(
    on(url, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`),
    (rows) => rows[0].n as number
  )

const serveWith = (databaseUrl: string) =>
  Effect.gen(function*() {
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "crm-relay-refusal-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const run = yield* cli(["serve"], {
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      MASTER_KEY: Redacted.value(Vault.generateMasterKey()),
      ADMIN_TOKEN: "refusal-test-token",
      PORT: "0",
      ADMIN_PORT: "0",
      PORTAL_PORT: "0",
      LOG_LEVEL: "Warning"
    })
    return { ...run, written: Fs.readdirSync(dataDir) }
  })

describe("serve refuses a DATABASE_URL it cannot use, at start, with a sentence, nothing written", () => {
  it.live("multi-host form: the sentence points to HAProxy or the provider's single endpoint; exit 2; no migration ran on the first host", () =>
    Effect.gen(function*() {
      const base = new URL(yield* Config.string("DATABASE_URL"))
      const fresh = `crm_relay_refusal_${Date.now()}`
      yield* Effect.acquireRelease(
        on(base.toString(), (sql) => sql.unsafe(`CREATE DATABASE ${fresh}`)),
        () => on(base.toString(), (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${fresh} WITH (FORCE)`))
      )
      const host = `${base.hostname}:${base.port || "5432"}`
      const run = yield* serveWith(`postgres://${base.username}@${host},${host}/${fresh}`)
      expect(run.code).toBe(2)
      expect(run.stderr.trim().split("\n").at(-1)).toMatch(
        /DATABASE_URL names several hosts \(.*\), which the PostgreSQL driver cannot follow: point it at one address that always reaches the primary, such as HAProxy in front of the cluster or the provider's single endpoint\.$/
      )
      const url = new URL(base.toString())
      url.pathname = `/${fresh}`
      expect(yield* tablesIn(url.toString())).toBe(0)
      expect(run.written).toEqual([])
    }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)

  it.live("a standby: the sentence says it is read-only and to point it at the primary; exit 2; nothing written", () =>
    Effect.gen(function*() {
      const pair = yield* PostgresStandby.start()
      const run = yield* serveWith(pair.standby.url())
      expect(run.code).toBe(2)
      expect(run.stderr.trim().split("\n").at(-1)).toMatch(
        /^DATABASE_URL reaches a read-only server \(a standby, pg_is_in_recovery\(\) is true, or transaction_read_only is on\): point it at the primary, or at the balancer's endpoint for the primary\.$/
      )
      expect(yield* tablesIn(pair.primary.url())).toBe(0)
      expect(run.written).toEqual([])
    }).pipe(Effect.scoped), PROCESS_TEST_TIMEOUT)
})
