/**
 * The operator's surface through the binary: every object listable, every
 * refusal the API's own sentence with exit code 2, whether the command goes
 * through a running server (embedded database) or to the database directly.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Database, TestDatabase } from "@crm-relay/store"
import { randomBytes } from "node:crypto"
import { Effect, Layer, Option, Redacted, Schedule } from "effect"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, serve } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"
import { bearer, request } from "./support/TestServer.js"

/** One MASTER_KEY for the whole file: on PostgreSQL its tests share one database, whose integration keys' tag secret is sealed under the key that created it. */
const FILE_MASTER_KEY = randomBytes(32).toString("base64")

const environment = Effect.gen(function*() {
  const db = yield* TestDatabase.TestDatabase
  const dataDir = Path.join(yield* tempDir("crm-relay-operator-"), "data")
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning" }
  if (Option.isSome(db.url)) {
    env["DATABASE_URL"] = Redacted.value(db.url.value)
    env["MASTER_KEY"] = FILE_MASTER_KEY
  }
  return { db, dataDir, env }
})

const parse = <A>(text: string): A => JSON.parse(text.trim()) as A

/**
 * Runs `effect` on the database the commands use, between commands: the
 * test schema on PostgreSQL, the embedded database in DATA_DIR otherwise.
 */
const onDatabase = <A>(
  db: TestDatabase.TestDatabase["Type"],
  dataDir: string,
  effect: Effect.Effect<A, unknown, SqlClient.SqlClient>
) =>
  db.kind === "postgres"
    ? Effect.orDie(effect)
    : effect.pipe(Effect.provide(Layer.fresh(Database.layerPglite({ dataDir }))), Effect.orDie)

/** A running server for the scope, and its published addresses once it listens. */
const running = (dataDir: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const server = yield* serve({ ...env, PORT: "0", ADMIN_PORT: "0" })
    // A generous bound against a hang (a busy machine starts slowly), never a measure of speed.
    return yield* ServerFile.running(dataDir).pipe(
      Effect.flatMap(Effect.orElseFail(() => "not yet")),
      Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo("240 seconds"))),
      Effect.orDieWith(() => new Error(`The server did not start: ${server.stderr()}`))
    )
  })

describe.sequential("crm-relay operator commands", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "240 seconds" })("with a running server", (it) => {
    it.scoped(
      "accounts, keys, subscriptions and connections are listable (never a key or a secret); mistakes exit 2 with the API's sentence",
      () =>
        Effect.gen(function*() {
          const { dataDir, db, env } = yield* environment
          const info = yield* running(dataDir, env)

          // Issue: `accounts create --name ""` printed a server or database failure.
          const empty = yield* cli(["accounts", "create", "--name", ""], env)
          expect(empty.code, empty.stderr).toBe(2)
          expect(empty.stderr.trim()).toBe("name must not be empty.")

          const first = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "First", "--json"], env)).stdout)
          const second = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "Second", "--json"], env)).stdout)
          const page1 = yield* cli(["accounts", "list", "--limit", "1", "--json"], env)
          expect(page1.code, page1.stderr).toBe(0)
          const listed = parse<{ accounts: Array<{ id: string }>; next_cursor: string | null }>(page1.stdout)
          expect(listed.accounts.map((a) => a.id)).toEqual([first.id])
          expect(listed.next_cursor).toBe(first.id)
          const page2 = parse<{ accounts: Array<{ id: string }>; next_cursor: string | null }>(
            (yield* cli(["accounts", "list", "--limit", "1", "--cursor", listed.next_cursor!, "--json"], env)).stdout
          )
          expect(page2).toEqual({ accounts: [expect.objectContaining({ id: second.id, name: "Second" })], next_cursor: null })
          const badCursor = yield* cli(["accounts", "list", "--cursor", "nope"], env)
          expect(badCursor.code, badCursor.stderr).toBe(2)
          expect(badCursor.stderr).toContain("cursor")

          const key = parse<{ id: string; key: string }>((yield* cli(["keys", "create", "--account", first.id, "--json"], env)).stdout)
          const subscribed = yield* request("POST", `${info.publicUrl}/subscribe`, {
            headers: { ...bearer(key.key), "content-type": "application/json" },
            body: JSON.stringify({ targetUrl: "https://hooks.example.com/x?token=secret", event: "lead" })
          })
          expect(subscribed.status).toBe(201)
          const subscriptionId = parse<{ id: string }>(subscribed.text).id

          const keys = yield* cli(["keys", "list", "--account", first.id, "--json"], env)
          expect(keys.code, keys.stderr).toBe(0)
          expect(keys.stdout).not.toContain(key.key)
          expect(parse<unknown>(keys.stdout)).toEqual({
            keys: [expect.objectContaining({ id: key.id, last_four: key.key.slice(-4), disabled: false, last_used_at: expect.any(String) })],
            next_cursor: null
          })
          const keysText = yield* cli(["keys", "list", "--account", first.id], env)
          expect(keysText.stdout).toContain(`…${key.key.slice(-4)}`)
          expect(keysText.stdout).not.toContain(key.key)

          const subscriptions = yield* cli(["subscriptions", "list", "--account", first.id, "--json"], env)
          expect(parse<unknown>(subscriptions.stdout)).toEqual({
            subscriptions: [
              expect.objectContaining({ id: subscriptionId, event: "lead", target: "https://hooks.example.com/x?…", created_by_key_id: key.id })
            ],
            next_cursor: null,
            count: 1,
            limit: 100
          })
          // Issue 35: the bound "shows in ... the CLI listing" as N of M (the server's MAX_SUBSCRIPTIONS_PER_ACCOUNT, default 100).
          const subscriptionsText = yield* cli(["subscriptions", "list", "--account", first.id], env)
          expect(subscriptionsText.stdout.split("\n")[0]).toBe("1 of 100 subscriptions (MAX_SUBSCRIPTIONS_PER_ACCOUNT; disabled ones count).")
          const shown = parse<{ active_keys: number; subscriptions: number; connections: number }>(
            (yield* cli(["accounts", "show", "--account", first.id, "--json"], env)).stdout
          )
          expect(shown).toEqual(expect.objectContaining({ id: first.id, active_keys: 1, subscriptions: 1, connections: 0 }))
          expect((yield* cli(["subscriptions", "remove", "--account", second.id, "--id", subscriptionId], env)).code).toBe(2)
          expect((yield* cli(["subscriptions", "remove", "--account", first.id, "--id", subscriptionId], env)).code).toBe(0)
          expect(parse<{ subscriptions: Array<unknown> }>(
            (yield* cli(["subscriptions", "list", "--account", first.id, "--json"], env)).stdout
          ).subscriptions).toEqual([])

          const connections = yield* cli(["connections", "list", "--account", first.id, "--json"], env)
          expect(parse<unknown>(connections.stdout)).toEqual({ connections: [], next_cursor: null })
          const removeNone = yield* cli(["connections", "remove", "--account", first.id, "--tenant", "t1"], env)
          expect(removeNone.code, removeNone.stderr).toBe(2)
          expect(removeNone.stderr).toContain("has no bridge connection")
          const unknown = yield* cli(["keys", "list", "--account", "00000000-0000-4000-8000-000000000000"], env)
          expect(unknown.code, unknown.stderr).toBe(2)
          expect(unknown.stderr).toContain("No account")

          const failed = yield* cli(["deliveries", "list", "--status", "failed,pending", "--json"], env)
          expect(failed.code, failed.stderr).toBe(0)
          expect(parse<unknown>(failed.stdout)).toEqual({ deliveries: [], next_cursor: null })
          const badStatus = yield* cli(["deliveries", "list", "--status", "failed,lost"], env)
          expect(badStatus.code, badStatus.stderr).toBe(2)
          expect(badStatus.stderr).toContain("\"lost\" is not a status")

          // Issue: rotate through a running server ignored MASTER_KEY and accepted a malformed one.
          const malformed = yield* cli(["master-key", "rotate"], { ...env, MASTER_KEY: "not-base64" })
          expect(malformed.code, malformed.stderr).toBe(2)
          expect(malformed.stderr).toContain("MASTER_KEY must be 32 random bytes in base64")
          // Through the running server (embedded database), a key other than the server's is refused.
          // On PostgreSQL the command works on the database itself, under the key it is given.
          if (db.kind === "pglite") {
            const other = yield* cli(["master-key", "rotate"], { ...env, MASTER_KEY: randomBytes(32).toString("base64") })
            expect(other.code, other.stderr).toBe(2)
            expect(other.stdout).not.toContain("Rotated")
            expect(other.stderr).toContain("not under the MASTER_KEY given to the command")
          }
        }),
      { timeout: 1_200_000 }
    )
  })

  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "240 seconds" })("on the database directly", (it) => {
    it.scoped(
      "pushes replay refuses a succeeded job without --force (exit 2) and keeps its attempt history; deliveries replay --status failed --account --since replays exactly the matching ones, with progress and a final count",
      () =>
        Effect.gen(function*() {
          const { dataDir, db, env } = yield* environment
          const account = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "A", "--json"], env)).stdout).id
          const other = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "B", "--json"], env)).stdout).id
          const keyId = parse<{ id: string }>((yield* cli(["keys", "create", "--account", account, "--json"], env)).stdout).id
          // A call whose push succeeded after two attempts, and failed deliveries old and new, of both accounts.
          const { deliveries, push } = yield* onDatabase(db, dataDir, Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            yield* sql`INSERT INTO call_outcomes (call_id, account_id, tenant_id, classification, body, body_digest, route)
                       VALUES ('call-1', ${account}, 't-1', 'lead', '{}'::jsonb, 'digest', 'push')`
            const [job] = yield* sql<{ id: string }>`
              INSERT INTO crm_push_jobs (call_id, account_id, tenant_id, status, attempts, finished_at)
              VALUES ('call-1', ${account}, 't-1', 'succeeded', 2, now()) RETURNING id`
            const [removed] = yield* sql<{ id: string }>`
              INSERT INTO subscriptions (account_id, target_url, event, created_by_key_id, removed_at)
              VALUES (${account}, 'https://hooks.example/removed', 'all', ${keyId}, now()) RETURNING id`
            const delivery = (accountId: string, status: string, createdAt: string, subscriptionId: string | null = null) =>
              Effect.map(
                sql<{ id: string }>`
                  INSERT INTO deliveries (account_id, event, call_id, payload, status, attempts, last_error, created_at, subscription_id)
                  VALUES (${accountId}, 'lead', 'call-1', '{}'::jsonb, ${status}, 8, 'HTTP 500', ${createdAt}::timestamptz, ${subscriptionId})
                  RETURNING id`,
                (rows) => rows[0]!.id
              )
            return {
              push: job!.id,
              deliveries: {
                old: yield* delivery(account, "failed", "2026-01-01T00:00:00Z"),
                recent: yield* delivery(account, "failed", "2026-03-01T00:00:00Z"),
                recentToo: yield* delivery(account, "failed", "2026-03-02T00:00:00Z"),
                delivered: yield* delivery(account, "delivered", "2026-03-03T00:00:00Z"),
                otherAccount: yield* delivery(other, "failed", "2026-03-01T00:00:00Z"),
                ofRemovedSubscription: yield* delivery(account, "failed", "2026-03-04T00:00:00Z", removed!.id)
              }
            }
          }))

          // Issue 35: on the database directly the listing's bound is this command's MAX_SUBSCRIPTIONS_PER_ACCOUNT; a removed hook does not count.
          const bounded = yield* cli(["subscriptions", "list", "--account", account, "--removed", "--json"], { ...env, MAX_SUBSCRIPTIONS_PER_ACCOUNT: "3" })
          expect(bounded.code, bounded.stderr).toBe(0)
          expect(parse<unknown>(bounded.stdout)).toEqual(expect.objectContaining({ count: 0, limit: 3 }))

          // Issue: `pushes replay` accepted a job that already succeeded and reset its attempt count.
          const refusedRun = yield* cli(["pushes", "replay", "--id", push], env)
          expect(refusedRun.code, refusedRun.stderr).toBe(2)
          expect(refusedRun.stderr).toContain(`CRM push job ${push} already succeeded`)
          expect(refusedRun.stderr).toContain("Add --force")
          const stillSucceeded = parse<{ pushes: Array<{ id: string; attempts: number }> }>(
            (yield* cli(["pushes", "list", "--status", "succeeded", "--json"], env)).stdout
          )
          expect(stillSucceeded.pushes).toEqual([expect.objectContaining({ id: push, attempts: 2 })])
          const forced = yield* cli(["pushes", "replay", "--id", push, "--force", "--json"], env)
          expect(forced.code, forced.stderr).toBe(0)
          expect(parse<unknown>(forced.stdout)).toEqual({ id: push, outcome: "queued" })
          const pending = parse<{ pushes: Array<unknown> }>((yield* cli(["pushes", "list", "--status", "pending", "--json"], env)).stdout)
          expect(pending.pushes).toEqual([expect.objectContaining({ id: push, status: "pending", attempts: 0, previous_attempts: 2 })])

          // A delivery of a removed subscription would be ended again unsent: refused alone (exit 2, the reason), counted in bulk.
          const refusedDelivery = yield* cli(["deliveries", "replay", "--id", deliveries.ofRemovedSubscription], env)
          expect(refusedDelivery.code, refusedDelivery.stderr).toBe(2)
          expect(refusedDelivery.stderr).toContain("This delivery's subscription was removed, so a replay would send nothing.")
          // Only the failed deliveries of the account created since --since: three match, two are queued, with progress lines and the count.
          const replayed = yield* cli(
            ["deliveries", "replay", "--status", "failed", "--account", account, "--since", "2026-02-01T00:00:00Z"],
            env
          )
          expect(replayed.code, replayed.stderr).toBe(0)
          expect(replayed.stderr).toContain("Replaying deliveries: 1/3\n")
          expect(replayed.stderr).toContain("Replaying deliveries: 3/3\n")
          expect(replayed.stdout.trim()).toBe(
            "Queued 2 of 3 matching deliveries again (same webhook-id each); 1 not replayed: their subscription was removed or is disabled (enable a disabled one first)."
          )
          const failedLeft = parse<{ deliveries: Array<{ id: string }> }>(
            (yield* cli(["deliveries", "list", "--status", "failed", "--json"], env)).stdout
          )
          expect(failedLeft.deliveries.map((d) => d.id).sort()).toEqual(
            [deliveries.old, deliveries.otherAccount, deliveries.ofRemovedSubscription].sort()
          )
          const pendingNow = parse<{ deliveries: Array<{ id: string }> }>(
            (yield* cli(["deliveries", "list", "--status", "pending", "--json"], env)).stdout
          )
          expect(pendingNow.deliveries.map((d) => d.id).sort()).toEqual([deliveries.recent, deliveries.recentToo].sort())
          // Again, as JSON: only the unsendable one matches now, and no progress line gets in the way of the one JSON line.
          const again = yield* cli(
            ["deliveries", "replay", "--status", "failed", "--account", account, "--since", "2026-02-01T00:00:00Z", "--json"],
            env
          )
          expect(parse<unknown>(again.stdout)).toEqual({ matched: 1, queued: 0, already_pending: 0, not_replayable: 1 })
          expect(again.stderr).not.toContain("Replaying deliveries")
        }),
      { timeout: 1_200_000 }
    )
  })
})
