/**
 * Issue 40: "After such a crash the server either reopens the database
 * within seconds, or exits non-zero so that systemd or the container runtime
 * restarts it." It exits: the built `crm-relay serve` on an embedded
 * DATA_DIR, outcomes posted under load, lead events delivered to an HTTPS
 * receiver on loopback, and PGlite's WebAssembly instance aborted in the
 * middle of a write (support/PgliteAbort, loaded into the child only). Then
 * the test restarts it as a supervisor would.
 *
 * The server's database is the embedded one whatever DATABASE_URL says: the
 * crash is PGlite's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Vault } from "@crm-relay/store"
import { Duration, Effect, Fiber, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND, type ServeProcess } from "./support/Cli.js"
import { eventually, loopbackTls } from "./support/Pipeline.js"
import { tempDir } from "./support/TempDir.js"
import { ADMIN_TOKEN, adminRequest, type Answer, leadOutcome, request } from "./support/TestServer.js"

type Json = Record<string, any>

const ABORT_HOOK = fileURLToPath(new URL("./support/PgliteAbort.ts", import.meta.url))

/** One webhook the receiver got: its call, its id, and when. */
interface Hook {
  readonly callId: string
  readonly webhookId: string
}

/**
 * An HTTPS receiver on 127.0.0.1 that holds its answers while `holding`
 * (the deliveries stay leased to the server that sent them), then answers
 * 200 to all of them and to every later one.
 */
const holdingReceiver = Effect.gen(function*() {
  const tls = yield* loopbackTls
  const hooks: Array<Hook> = []
  const held: Array<() => void> = []
  let holding = true
  const server = yield* Effect.acquireRelease(
    Effect.async<Https.Server>((resume) => {
      const s = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json
          hooks.push({ callId: body["call_id"], webhookId: String(req.headers["webhook-id"]) })
          const answer = () => {
            if (!res.destroyed) res.writeHead(200, { "content-type": "application/json" }).end("{}")
          }
          if (holding) held.push(answer)
          else answer()
        })
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) =>
      Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
  )
  return {
    ca: tls.ca,
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/crash`,
    hooks: () => [...hooks],
    release: Effect.sync(() => {
      holding = false
      for (const answer of held.splice(0)) answer()
    })
  }
})

/** An answer, or undefined when the connection failed (refused, reset). */
const attempt = (effect: Effect.Effect<Answer>): Effect.Effect<Answer | undefined> =>
  Effect.catchAllDefect(effect, () => Effect.succeed(undefined))

/** The JSON lines of a child's stdout. */
const logLines = (server: ServeProcess): Array<Json> =>
  server.stdout().split("\n").flatMap((line) => {
    try {
      return [JSON.parse(line) as Json]
    } catch {
      return []
    }
  })

describe("the embedded database's WebAssembly instance crashing under load (#40)", () => {
  it.scopedLive(
    "#40: \"exits non-zero so that systemd or the container runtime restarts it\": it exits 1 at once, no probe answers after the crash, and after a restart every 202 is delivered, under one webhook-id each",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("crm-relay-pglite-crash-")
        const receiver = yield* holdingReceiver
        const caFile = Path.join(dir, "ca.pem")
        Fs.writeFileSync(caFile, receiver.ca)
        const dataDir = Path.join(dir, "data")
        const env: Record<string, string> = {
          DATA_DIR: dataDir,
          ADMIN_TOKEN,
          MASTER_KEY: Redacted.value(Vault.generateMasterKey()),
          EGRESS_ALLOW_PRIVATE: "127.0.0.1/32",
          NODE_EXTRA_CA_CERTS: caFile,
          LOG_LEVEL: "Info"
        }
        const adminOf = (pid: number) =>
          Effect.map(
            eventually(ServerFile.running(dataDir), (info) => Option.isSome(info) && info.value.pid === pid, SERVE_START_BOUND),
            (info) => Option.getOrThrow(info)
          )

        const first = yield* serve({ ...env, NODE_OPTIONS: `--import=${ABORT_HOOK}` })
        const firstUrls = yield* adminOf(first.pid)
        let admin = firstUrls.adminUrl
        const account = (yield* adminRequest(admin, "POST", "/v1/accounts", { name: "PGlite crash", mode: "live" })).json as Json
        const key = ((yield* adminRequest(admin, "POST", `/v1/accounts/${account["id"]}/keys`)).json as Json)["key"] as string
        const subscribed = yield* request("POST", `${firstUrls.publicUrl}/subscribe`, {
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ targetUrl: receiver.url, event: "lead" })
        })
        expect(subscribed.status).toBe(201)

        // Load: two callers, each posting outcomes one after another; like the call-handling service, a caller
        // posts the same call again until it is answered 202 (a refused connection, a reset, a 5xx).
        const accepted: Array<string> = []
        let loading = true
        const caller = (name: string) =>
          Effect.gen(function*() {
            for (let n = 0; loading; n++) {
              const callId = `call-${name}-${n}`
              while (true) {
                const answer = yield* attempt(adminRequest(admin, "POST", `/v1/calls/${callId}/outcome`, leadOutcome(account["id"])))
                if (answer?.status === 202) break
                yield* Effect.sleep(Duration.millis(50))
              }
              accepted.push(callId)
            }
          })
        const load = yield* Effect.fork(Effect.all([caller("a"), caller("b")], { concurrency: 2 }))

        // The probes a supervisor or load balancer sends, every 20 ms, each with the time it was sent.
        const probes: Array<{ readonly path: string; readonly sentAt: number; readonly status: number | undefined }> = []
        const probing = yield* Effect.fork(Effect.forever(Effect.gen(function*() {
          for (const path of ["/healthz", "/readyz"]) {
            const sentAt = Date.now()
            const answer = yield* attempt(request("GET", `${firstUrls.adminUrl}${path}`))
            probes.push({ path, sentAt, status: answer?.status })
          }
          yield* Effect.sleep(Duration.millis(20))
        })))

        // Under load, with deliveries held by the receiver (leased to this process): the instance aborts.
        yield* eventually(Effect.sync(() => [accepted.length, receiver.hooks().length]), ([a, h]) => a! >= 20 && h! >= 1)
        const answered = (path: string) => probes.some((p) => p.path === path && p.status === 200)
        yield* eventually(Effect.sync(() => answered("/healthz") && answered("/readyz")), (both) => both)
        process.kill(first.pid, "SIGUSR2")
        const code = yield* Effect.timeoutFail(first.exited, {
          duration: Duration.minutes(1),
          onTimeout: () => new Error(`still running after the crash: ${first.stderr()}`)
        })
        const exitedAt = Date.now()
        yield* Fiber.interrupt(probing)
        const acceptedBeforeRestart = accepted.length
        expect(code).toBe(1)

        // What the operator sees: one fatal line saying what happened and what happens next.
        const fatal = logLines(first).filter((line) => line["level"] === "fatal")
        expect(fatal).toHaveLength(1)
        expect(fatal[0]!["msg"]).toBe(
          "The embedded database crashed (its WebAssembly instance trapped): exiting with code 1 for the supervisor to " +
            "start the server again, which recovers the database and takes back this run's jobs"
        )
        expect(fatal[0]!["error"]).toContain("Aborted()")
        const crashedAt = Date.parse(fatal[0]!["time"])
        // At once: the exit follows the crash within seconds (here, at the trap itself).
        expect(exitedAt - crashedAt).toBeLessThan(10_000)
        // Truthful probes: both answered 200 before the crash, and no probe sent after it was answered at all.
        const before = probes.filter((p) => p.sentAt < crashedAt)
        expect(before.filter((p) => p.path === "/healthz").map((p) => p.status)).toContain(200)
        expect(before.filter((p) => p.path === "/readyz").map((p) => p.status)).toContain(200)
        expect(probes.filter((p) => p.sentAt > crashedAt && p.status !== undefined)).toEqual([])

        // The supervisor starts it again (the same command, without the test's hook).
        const second = yield* serve(env)
        admin = (yield* adminOf(second.pid)).adminUrl
        yield* receiver.release
        // The deliveries leased to the dead process are taken back at start, not after their leases expire.
        const tookBack = yield* eventually(
          Effect.sync(() => logLines(second).filter((line) => line["msg"] === "Took back the jobs of a previous run")),
          (lines) => lines.length >= 1,
          SERVE_START_BOUND
        )
        expect(tookBack.map((line) => Number(line["released"])).reduce((a, b) => a + b)).toBeGreaterThanOrEqual(1)

        // The load goes on through the new process; then every call answered 202 is delivered.
        yield* eventually(Effect.sync(() => accepted.length), (n) => n >= acceptedBeforeRestart + 20)
        loading = false
        yield* Fiber.join(load)
        const delivered = () => new Set(receiver.hooks().map((hook) => hook.callId))
        yield* eventually(
          Effect.sync(() => accepted.filter((callId) => !delivered().has(callId))),
          (missing) => missing.length === 0,
          Duration.minutes(3)
        )
        // One webhook-id per call (its one delivery), however often it was sent.
        const ids = new Map<string, Set<string>>()
        for (const hook of receiver.hooks()) ids.set(hook.callId, (ids.get(hook.callId) ?? new Set()).add(hook.webhookId))
        expect([...ids].filter(([, set]) => set.size !== 1)).toEqual([])
        expect(yield* second.terminate).toBe(0)
      }),
    PROCESS_TEST_TIMEOUT
  )
})
