/**
 * The operator's surface through the binary: every object listable, every
 * refusal the API's own sentence with exit code 2, whether the command goes
 * through a running server (embedded database) or to the database directly.
 */
import { describe, expect, layer } from "@effect/vitest"
import { TestDatabase } from "@crm-relay/store"
import { randomBytes } from "node:crypto"
import { Effect, Option, Redacted, Schedule } from "effect"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { cli, serve } from "./support/Cli.js"
import { tempDir } from "./support/TempDir.js"
import { bearer, request } from "./support/TestServer.js"

const environment = Effect.gen(function*() {
  const db = yield* TestDatabase.TestDatabase
  const dataDir = Path.join(yield* tempDir("crm-relay-operator-"), "data")
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: "Warning" }
  if (Option.isSome(db.url)) {
    env["DATABASE_URL"] = Redacted.value(db.url.value)
    env["MASTER_KEY"] = randomBytes(32).toString("base64")
  }
  return { db, dataDir, env }
})

const parse = <A>(text: string): A => JSON.parse(text.trim()) as A

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
          expect(empty.code).toBe(2)
          expect(empty.stderr.trim()).toBe("name must not be empty.")

          const first = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "First", "--json"], env)).stdout)
          const second = parse<{ id: string }>((yield* cli(["accounts", "create", "--name", "Second", "--json"], env)).stdout)
          const page1 = yield* cli(["accounts", "list", "--limit", "1", "--json"], env)
          expect(page1.code).toBe(0)
          const listed = parse<{ accounts: Array<{ id: string }>; next_cursor: string | null }>(page1.stdout)
          expect(listed.accounts.map((a) => a.id)).toEqual([first.id])
          expect(listed.next_cursor).toBe(first.id)
          const page2 = parse<{ accounts: Array<{ id: string }>; next_cursor: string | null }>(
            (yield* cli(["accounts", "list", "--limit", "1", "--cursor", listed.next_cursor!, "--json"], env)).stdout
          )
          expect(page2).toEqual({ accounts: [expect.objectContaining({ id: second.id, name: "Second" })], next_cursor: null })
          const badCursor = yield* cli(["accounts", "list", "--cursor", "nope"], env)
          expect(badCursor.code).toBe(2)
          expect(badCursor.stderr).toContain("cursor")

          const key = parse<{ id: string; key: string }>((yield* cli(["keys", "create", "--account", first.id, "--json"], env)).stdout)
          const subscribed = yield* request("POST", `${info.publicUrl}/subscribe`, {
            headers: { ...bearer(key.key), "content-type": "application/json" },
            body: JSON.stringify({ targetUrl: "https://hooks.example.com/x?token=secret", event: "lead" })
          })
          expect(subscribed.status).toBe(201)
          const subscriptionId = parse<{ id: string }>(subscribed.text).id

          const keys = yield* cli(["keys", "list", "--account", first.id, "--json"], env)
          expect(keys.code).toBe(0)
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
            next_cursor: null
          })
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
          expect(removeNone.code).toBe(2)
          expect(removeNone.stderr).toContain("has no bridge connection")
          const unknown = yield* cli(["keys", "list", "--account", "00000000-0000-4000-8000-000000000000"], env)
          expect(unknown.code).toBe(2)
          expect(unknown.stderr).toContain("No account")

          const failed = yield* cli(["deliveries", "list", "--status", "failed,pending", "--json"], env)
          expect(failed.code).toBe(0)
          expect(parse<unknown>(failed.stdout)).toEqual({ deliveries: [], next_cursor: null })
          const badStatus = yield* cli(["deliveries", "list", "--status", "failed,lost"], env)
          expect(badStatus.code).toBe(2)
          expect(badStatus.stderr).toContain("\"lost\" is not a status")

          // Issue: rotate through a running server ignored MASTER_KEY and accepted a malformed one.
          const malformed = yield* cli(["master-key", "rotate"], { ...env, MASTER_KEY: "not-base64" })
          expect(malformed.code).toBe(2)
          expect(malformed.stderr).toContain("MASTER_KEY must be 32 random bytes in base64")
          // Through the running server (embedded database), a key other than the server's is refused.
          // On PostgreSQL the command works on the database itself, under the key it is given.
          if (db.kind === "pglite") {
            const other = yield* cli(["master-key", "rotate"], { ...env, MASTER_KEY: randomBytes(32).toString("base64") })
            expect(other.code).toBe(2)
            expect(other.stdout).not.toContain("Rotated")
            expect(other.stderr).toContain("not under the MASTER_KEY given to the command")
          }
        }),
      { timeout: 1_200_000 }
    )
  })
})
