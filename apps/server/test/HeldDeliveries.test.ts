/**
 * Held deliveries as the operator sees them (issue 40), through a running
 * server and a loopback HTTPS receiver that answers 503: the internal API's
 * listing gives `held` for each pending delivery of the failing origin (null
 * otherwise), and `crm-relay deliveries list --account` prints the held
 * sentence, through the server on the embedded database, or on the database
 * directly on PostgreSQL.
 */
import { expect, layer } from "@effect/vitest"
import type { DeliveryPage } from "@crm-relay/contract/InternalApi/DeliveriesApi"
import { TestDatabase } from "@crm-relay/store"
import type { Certificate } from "@crm-relay/testing"
import { Context, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import * as Server from "../src/http/Server.js"
import { cli } from "./support/Cli.js"
import { bridgeSide, RECEIVER_HOST } from "./support/LoopbackEgress.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { accountWithKey, ADMIN_TOKEN, adminOf, harnessOver, jsonWith, layerServer, leadOutcome, request } from "./support/TestServer.js"

/** A receiver answering every request with the status last set (200 at first). */
interface Receiver {
  readonly url: (path: string) => string
  readonly answer: (status: number) => void
}

const receiver = (tls: Certificate.TlsMaterial): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    let status = 200
    const server = yield* Effect.acquireRelease(
      Effect.async<Https.Server>((resume) => {
        const s = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
          req.resume()
          req.on("end", () => {
            res.writeHead(status, { "content-type": "application/json" }).end("{}")
          })
        })
        s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
      }),
      (s) => Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
    )
    const port = (server.address() as AddressInfo).port
    return {
      url: (path) => `https://${RECEIVER_HOST}:${port}${path}`,
      answer: (value) => {
        status = value
      }
    }
  })

class Harness extends Context.Tag("test/HeldHarness")<Harness, {
  readonly admin: string
  readonly public: string
  readonly receiver: Receiver
  /** The environment of a CLI command that reaches this server's data. */
  readonly env: Record<string, string>
}>() {}

const harness = Layer.scoped(
  Harness,
  Effect.gen(function*() {
    const tls = yield* loopbackTls
    const hooks = yield* receiver(tls)
    const db = yield* TestDatabase.TestDatabase
    // The server publishes DATA_DIR/server.json, so the CLI goes through it on the embedded database;
    // on PostgreSQL the CLI reads the same database directly.
    const dataDir = Path.join(yield* tempDir("crm-relay-held-"), "data")
    const server = yield* Layer.build(
      layerServer({ role: "all", bridge: bridgeSide([tls.ca]), dataDir: Option.some(dataDir) })
    ).pipe(Effect.orDie)
    const listening = Context.get(server, Server.Listening)
    const env: Record<string, string> = { DATA_DIR: dataDir, ADMIN_TOKEN, LOG_LEVEL: "Warning" }
    if (Option.isSome(db.url)) env["DATABASE_URL"] = Redacted.value(db.url.value)
    return {
      admin: listening.internalApi.url,
      public: Option.getOrThrow(listening.publicApi).url,
      receiver: hooks,
      env
    }
  })
).pipe(harnessOver)

const admin = adminOf(Harness)

const deliveries = (accountId: string) =>
  Effect.map(admin("GET", `/v1/accounts/${accountId}/deliveries`), (a) => a.json as DeliveryPage)

const lead = (accountId: string) =>
  Effect.map(admin("POST", `/v1/calls/call-${randomUUID()}/outcome`, leadOutcome(accountId)), (a) => expect(a.status).toBe(202))

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

layer(harness, { excludeTestServices: true, timeout: "600 seconds" })("held deliveries on the server", (it) => {
  it.effect("\"The listings, the CLI ... say 'held: the receiver has been failing since …, next try at …'\": GET /v1/accounts/{id}/deliveries gives held {failing_since, next_try_at} for the held pending deliveries and null otherwise, and deliveries list --account prints the sentence; once the receiver answers, everything is delivered and nothing is held", () =>
    Effect.gen(function*() {
      const h = yield* Harness
      const { accountId, key } = yield* accountWithKey()
      const subscribed = yield* request("POST", `${h.public}/subscribe`, {
        headers: jsonWith(key),
        body: JSON.stringify({ targetUrl: h.receiver.url(`/hooks/${randomUUID()}`), event: "all" })
      })
      expect(subscribed.status).toBe(201)

      // Delivered while the receiver answers: never held.
      yield* lead(accountId)
      const first = (yield* eventually(deliveries(accountId), (p) => p.deliveries[0]?.status === "delivered")).deliveries[0]!
      expect(first.held).toBeNull()

      // 503 to three distinct deliveries holds the origin; the fourth waits without an attempt.
      h.receiver.answer(503)
      for (let i = 0; i < 4; i++) yield* lead(accountId)
      const held = yield* eventually(
        deliveries(accountId),
        (p) => p.deliveries.length === 5 && p.deliveries.filter((d) => d.status === "pending" && d.held !== null).length === 4
      )
      const failingSince = held.deliveries[0]!.held!.failing_since
      for (const d of held.deliveries) {
        if (d.id === first.id) {
          expect(d).toMatchObject({ status: "delivered", held: null })
          continue
        }
        expect(d.status).toBe("pending")
        expect(d.held).toEqual({ failing_since: failingSince, next_try_at: expect.stringMatching(ISO) })
        expect(Date.parse(d.held!.next_try_at)).toBeGreaterThanOrEqual(Date.parse(failingSince))
      }
      expect(failingSince).toMatch(ISO)

      const text = yield* cli(["deliveries", "list", "--account", accountId], h.env)
      expect(text.code, text.stderr).toBe(0)
      const heldLines = text.stdout.split("\n").filter((line) => line.trim().startsWith("held:"))
      expect(heldLines).toHaveLength(4)
      for (const line of heldLines) {
        expect(line).toMatch(new RegExp(`^ {4}held: the receiver has been failing since ${failingSince.replace(/\./g, "\\.")}, next try at \\S+Z$`))
      }
      const json = yield* cli(["deliveries", "list", "--account", accountId, "--json"], h.env)
      expect(json.code, json.stderr).toBe(0)
      const listed = JSON.parse(json.stdout) as DeliveryPage
      expect(listed.deliveries.map((d) => d.held?.failing_since ?? null).sort()).toEqual([null, ...Array(4).fill(failingSince)].sort())

      // Back: the probe finds it answering and everything held drains.
      h.receiver.answer(204)
      const drained = yield* eventually(deliveries(accountId), (p) => p.deliveries.every((d) => d.status === "delivered"))
      expect(drained.deliveries.map((d) => d.held)).toEqual(Array(5).fill(null))
      const after = yield* cli(["deliveries", "list", "--account", accountId], h.env)
      expect(after.code, after.stderr).toBe(0)
      expect(after.stdout).not.toContain("held:")
      expect(after.stdout.split("\n").filter((line) => line.includes("  delivered  "))).toHaveLength(5)
    }))
})
