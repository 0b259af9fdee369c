/**
 * Issue 40 ("back in seconds, quiet while down") with real `crm-relay serve`
 * processes on one PostgreSQL database: one ROLE=api replica takes the call
 * outcomes, two ROLE=worker replicas deliver them to one HTTPS receiver on
 * loopback (one receiver origin). The receiver fails; once its origin is
 * held, the replicas share one probe between them; the replica holding the
 * probe is SIGKILLed while the probe is in flight, and the other one takes
 * over once the dead probe's lease ends.
 *
 * PostgreSQL only (replicas share a database; PGlite is one process's), so
 * vitest.config.ts runs this file only when DATABASE_URL is set. One set of
 * processes for the file: the second test goes on from the first's state.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { OriginHealth } from "@crm-relay/events"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND, type ServeProcess } from "./support/Cli.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { ADMIN_TOKEN, adminRequest, jsonWith, request } from "./support/TestServer.js"

type Json = Record<string, any>

/** The first probe interval (the server's, OriginHealth's default): held, an origin gets no request sooner than this after the last. */
const PROBE_INTERVAL_MS = Duration.toMillis(OriginHealth.DEFAULT_PROBE_POLICY.first)

/** One request the receiver got: when, for which call, under which webhook-id, and what it was answered. */
interface Hit {
  readonly at: number
  readonly callId: string
  readonly webhookId: string
  status: number | undefined
}

/** How the receiver answers now. */
interface Answering {
  readonly status: number
  readonly delayMs: number
}

/** An HTTPS receiver on 127.0.0.1 answering every request as `answering` says at its arrival. */
const failingReceiver = (tls: { readonly cert: string; readonly key: string }) =>
  Effect.gen(function*() {
    const hits: Array<Hit> = []
    let answering: Answering = { status: 503, delayMs: 0 }
    let inFlight = 0
    const server = yield* Effect.acquireRelease(
      Effect.async<Https.Server>((resume) => {
        const s = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const body = Buffer.concat(chunks).toString("utf8")
            let callId = ""
            try {
              callId = String((JSON.parse(body) as Json)["call_id"] ?? "")
            } catch {
              callId = ""
            }
            const hit: Hit = { at: Date.now(), callId, webhookId: String(req.headers["webhook-id"] ?? ""), status: undefined }
            hits.push(hit)
            const answer = answering
            inFlight++
            setTimeout(() => {
              inFlight--
              if (res.destroyed) return
              hit.status = answer.status
              res.writeHead(answer.status, { "content-type": "application/json" }).end("{}")
            }, answer.delayMs)
          })
        })
        s.keepAliveTimeout = 0
        s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
      }),
      (s) =>
        Effect.async<void>((resume) => {
          s.closeAllConnections()
          s.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as AddressInfo).port
    return {
      origin: `https://127.0.0.1:${port}`,
      url: `https://127.0.0.1:${port}/hold`,
      hits: () => [...hits],
      inFlight: () => inFlight,
      answer: (next: Answering) => Effect.sync(() => void (answering = next))
    }
  })

/** The file's processes, receiver and account. */
class Replicas extends Context.Tag("test/OriginHoldReplicas")<Replicas, {
  readonly admin: string
  readonly accountId: string
  readonly workers: ReadonlyArray<ServeProcess>
  readonly receiver: Effect.Effect.Success<ReturnType<typeof failingReceiver>>
  /** The call ids of every outcome answered 202. */
  readonly accepted: Array<string>
}>() {}

const ReplicasLive = Layer.scoped(
  Replicas,
  Effect.gen(function*() {
    const db = yield* TestDatabase.TestDatabase
    const dir = yield* tempDir("crm-relay-origin-hold-")
    const tls = yield* loopbackTls
    const receiver = yield* failingReceiver(tls)
    const caFile = Path.join(dir, "ca.pem")
    Fs.writeFileSync(caFile, tls.ca)
    const base: Record<string, string> = {
      ADMIN_TOKEN,
      MASTER_KEY: Redacted.value(Vault.generateMasterKey()),
      EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
      NODE_EXTRA_CA_CERTS: caFile,
      DATABASE_URL: Redacted.value(Option.getOrThrow(db.url)),
      LOG_LEVEL: "Warning"
    }
    // Each replica has a data directory (its server file) of its own; they share the database.
    const started = (name: string, role: string) =>
      Effect.gen(function*() {
        const dataDir = Path.join(dir, name)
        const child = yield* serve({ ...base, DATA_DIR: dataDir, ROLE: role })
        const info = yield* eventually(
          ServerFile.running(dataDir),
          (info) => Option.isSome(info) && info.value.pid === child.pid,
          SERVE_START_BOUND
        )
        return { child, info: Option.getOrThrow(info) }
      })
    const [api, first, second] = yield* Effect.all(
      [started("api", "api"), started("worker-1", "worker"), started("worker-2", "worker")],
      { concurrency: "unbounded" }
    )
    const admin = api!.info.adminUrl
    const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name: "Held origin", mode: "live" })).json as Json
    const key = ((yield* adminRequest(admin, "POST", `/v1/accounts/${account["id"]}/keys`)).json as Json)["key"] as string
    const subscribed = yield* request("POST", `${api!.info.publicUrl}/subscribe`, {
      headers: jsonWith(key),
      body: JSON.stringify({ targetUrl: receiver.url, event: "lead" })
    })
    expect(subscribed.status).toBe(201)
    return { admin, accountId: String(account["id"]), workers: [first!.child, second!.child], receiver, accepted: [] }
  })
)

/** Posts one lead outcome through the API replica; answers its call id (kept when answered 202). */
const postOutcome = Effect.gen(function*() {
  const { accepted, accountId, admin } = yield* Replicas
  const callId = `call-${randomUUID()}`
  const answer = yield* adminRequest(admin, "POST", `/v1/calls/${callId}/outcome`, {
    account_id: accountId,
    tenant_id: "t-none",
    classification: "lead",
    source: "Held origin (phone)",
    tags: [],
    caller: { full_name: "Ada Lovelace", first_name: "Ada", last_name: "Lovelace", phones: ["+44 20 7946 0001"], emails: [], address: "" },
    lead: { job_type: "Survey", summary: "Needs a survey", notes: "", urgency: "" }
  })
  expect(answer.status).toBe(202)
  accepted.push(callId)
  return callId
})

interface Health {
  readonly held: boolean
  readonly probe_owner: string | null
  readonly probe_until: Date | null
}

/** The receiver origin's health row, if it has one. */
const health = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { receiver } = yield* Replicas
  const rows = yield* sql<Health>`SELECT failing_since IS NOT NULL AS held, probe_owner, probe_until
    FROM origin_health WHERE origin = ${receiver.origin}`.pipe(Effect.orDie)
  return Option.fromNullable(rows[0])
})

/** The process id in a lease owner (`hostname:pid:random`, JobQueue's). */
const pidOf = (owner: string): number => Number(owner.split(":")[1])

/** The receiver failing (503 at once): outcomes one after the other, each failing, until its origin is held. */
const holdOrigin = Effect.gen(function*() {
  const { receiver } = yield* Replicas
  yield* receiver.answer({ status: 503, delayMs: 0 })
  for (let i = 0; i < 10; i++) {
    if (Option.exists(yield* health, (h) => h.held)) return
    const callId = yield* postOutcome
    yield* eventually(Effect.sync(() => receiver.hits().some((h) => h.callId === callId && h.status !== undefined)), (sent) => sent)
    // The failure is noted (the streak grows, or holds the origin) once the worker stored the attempt.
    yield* eventually(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE call_id = ${callId} AND lease_owner IS NULL`
      ).pipe(Effect.orDie),
      (rows) => rows[0]!.n === 1
    )
  }
  yield* Effect.dieMessage("The origin was not held after 10 failing deliveries")
})

describe("receiver origins held across replicas (#40)", () => {
  layer(ReplicasLive.pipe(Layer.provideMerge(TestDatabase.layer)), { excludeTestServices: true, timeout: PROCESS_TEST_TIMEOUT })((it) => {
    it.effect("#40: two replicas sharing one failing origin: one probe, not two (held, the receiver gets at most one request per probe interval in all, whichever replica probes)", () =>
      Effect.gen(function*() {
        const { receiver } = yield* Replicas
        yield* holdOrigin
        const heldAt = Date.now()
        const owners = new Set<number>()
        // Events keep coming while it is held: none of them is sent but as the one probe.
        for (let probes = 1; probes <= 3; probes++) {
          yield* postOutcome
          yield* eventually(
            Effect.zipLeft(
              Effect.sync(() => receiver.hits().filter((h) => h.at > heldAt).length),
              Effect.tap(health, (h) => Option.isSome(h) && h.value.probe_owner !== null ? owners.add(pidOf(h.value.probe_owner)) : undefined)
            ),
            (n) => n >= probes,
            Duration.minutes(1)
          )
        }
        const probes = receiver.hits().filter((h) => h.at > heldAt)
        const gaps = probes.slice(1).map((h, i) => h.at - probes[i]!.at)
        // Each probe after the last one's answer and the interval: two replicas probing would show gaps near zero.
        expect(gaps.filter((gap) => gap < PROBE_INTERVAL_MS)).toEqual([])
        // Still held: the probes failed.
        expect(Option.map(yield* health, (h) => h.held)).toEqual(Option.some(true))
        yield* Effect.logInfo("Probes of the held origin").pipe(Effect.annotateLogs({ gaps, owners: [...owners] }))
      }))

    it.effect("#40: a kill of the replica holding the probe: another takes over (once the dead probe's lease ends), nothing lost: every outcome answered 202 arrives, each under one webhook-id", () =>
      Effect.gen(function*() {
        const { accepted, receiver, workers } = yield* Replicas
        yield* holdOrigin
        // The probe answers slowly (within the egress deadline): it is in flight when its replica dies.
        yield* receiver.answer({ status: 503, delayMs: 8_000 })
        const before = receiver.hits().length
        const inFlight = yield* eventually(
          Effect.zip(health, Effect.sync(() => receiver.hits().length > before && receiver.inFlight() > 0)),
          ([h, sent]) => sent && Option.isSome(h) && h.value.probe_owner !== null,
          Duration.minutes(1)
        )
        const probe = Option.getOrThrow(inFlight[0])
        const owner = pidOf(probe.probe_owner!)
        const dying = workers.find((w) => w.pid === owner)
        const survivor = workers.find((w) => w.pid !== owner)!
        expect(dying).toBeDefined()
        process.kill(owner, "SIGKILL")
        yield* dying!.exited
        const killedAt = Date.now()
        // Events go on arriving; the receiver is back.
        yield* postOutcome
        yield* postOutcome
        yield* receiver.answer({ status: 204, delayMs: 0 })
        yield* eventually(
          Effect.sync(() => {
            const answered = new Set(receiver.hits().filter((h) => h.status === 204).map((h) => h.callId))
            return accepted.filter((id) => !answered.has(id))
          }),
          (missing) => missing.length === 0,
          Duration.minutes(2)
        )
        // Nothing was sent before the dead replica's probe lease ended: still one probe at a time.
        const afterKill = receiver.hits().filter((h) => h.at >= killedAt)
        expect(afterKill.length).toBeGreaterThan(0)
        expect(afterKill.filter((h) => h.at < probe.probe_until!.getTime())).toEqual([])
        // One webhook-id per outcome, however often it was sent.
        const ids = new Map<string, Set<string>>()
        for (const hit of receiver.hits()) ids.set(hit.callId, (ids.get(hit.callId) ?? new Set()).add(hit.webhookId))
        expect([...ids.entries()].filter(([, set]) => set.size !== 1)).toEqual([])
        expect(new Set(ids.keys())).toEqual(new Set(accepted))
        // Back: the origin is no longer held, and the surviving replica did it all.
        yield* eventually(health, Option.isNone)
        expect(survivor.pid).not.toBe(owner)
        expect(process.kill(survivor.pid, 0)).toBe(true)
      }))
  })
})
