/**
 * The embedded database on a full disk: the built server on a small tmpfs
 * (a mount namespace of its own; see support/SmallDisk) that a filler file
 * fills while outcomes and Event API requests keep coming.
 */
import { describe, expect, it } from "@effect/vitest"
import { Eventually } from "@crm-relay/testing"
import { Duration, Effect, Fiber, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as ServerFile from "../src/config/ServerFile.js"
import { PROCESS_TEST_TIMEOUT, serve, SERVE_START_BOUND, type ServeProcess } from "./support/Cli.js"
import * as SmallDisk from "./support/SmallDisk.js"
import { ADMIN_TOKEN, adminRequest, type Answer, jsonWith, leadOutcome, request } from "./support/TestServer.js"

/** The Event API's answers (event-api.md, Errors); an internal failure is its 502. */
const CONTRACT_STATUSES = [200, 201, 400, 401, 404, 429, 502]

/** Waits for `check`, polling gently (each check is a request to a busy server). */
const until = (check: Effect.Effect<boolean>) =>
  Eventually.eventually(Effect.zipLeft(check, Eventually.pause(100)), SERVE_START_BOUND)

/** A started server inside the small disk's namespace, with its addresses. */
const started = (disk: SmallDisk.SmallDisk, env: Record<string, string>) =>
  Effect.gen(function*() {
    const server = yield* serve(env, disk.enter)
    let info: Option.Option<ServerFile.ServerInfo> = Option.none()
    yield* until(Effect.map(ServerFile.running(disk.outside), (found) => {
      info = found
      return Option.isSome(found) && found.value.pid === server.pid
    }))
    const { adminUrl, publicUrl } = Option.getOrThrow(info)
    return { server, admin: adminUrl, pub: publicUrl }
  })

const alive = (server: ServeProcess) => Effect.map(Effect.timeout(server.exited, Duration.millis(1)), () => false).pipe(
  Effect.catchTag("TimeoutException", () => Effect.succeed(true))
)

describe("a full disk under the embedded database", () => {
  it.scopedLive(
    "the public port answers the contract's 502, /readyz says 503 with the reason, nothing accepted (202) is lost, and it recovers by itself once space is freed",
    () =>
      Effect.gen(function*() {
        const disk = yield* SmallDisk.make(128)
        const env = { DATA_DIR: disk.dir, ADMIN_TOKEN, MASTER_KEY: randomBytes(32).toString("base64"), LOG_LEVEL: "Error" }
        const first = yield* started(disk, env)
        const account = (yield* adminRequest(first.admin, "POST", "/v1/accounts", { name: "Full disk" })).json as { id: string }
        const newKey = Effect.map(
          adminRequest(first.admin, "POST", `/v1/accounts/${account.id}/keys`),
          (answer) => (answer.json as { key: string }).key
        )
        // Several keys, so the rate limit (60 a minute per key) leaves room for writes that fill pages.
        const keys = yield* Effect.all(Array.from({ length: 4 }, () => newKey))
        const subscribe = (key: string) =>
          request("POST", `${first.pub}/subscribe`, { headers: jsonWith(key), body: JSON.stringify({ targetUrl: "https://hooks.example/h" }) })

        // Load: outcomes one after another (each with a lead's delivery), and Event API writes beside them.
        // Every call id accepted; the other answers by status and body (refusals come fast and many).
        const accepted: Array<string> = []
        const refusedOutcomes = new Map<string, number>()
        const publicAnswers = new Map<string, number>()
        const count = (answers: Map<string, number>, answer: Answer) => {
          const key = JSON.stringify([answer.status, answer.json])
          answers.set(key, (answers.get(key) ?? 0) + 1)
        }
        const outcomes = Effect.gen(function*() {
          for (let n = 0;; n++) {
            const callId = `call-full-disk-${n}`
            const answer = yield* adminRequest(first.admin, "POST", `/v1/calls/${callId}/outcome`, leadOutcome(account.id))
            if (answer.status === 202) accepted.push(callId)
            else count(refusedOutcomes, answer)
            yield* Eventually.pause(answer.status === 202 ? 5 : 50)
          }
        })
        const eventApi = Effect.gen(function*() {
          for (let n = 0;; n++) {
            count(publicAnswers, yield* subscribe(keys[n % keys.length]!))
            yield* Eventually.pause(50)
          }
        })
        const load = yield* Effect.fork(Effect.all([outcomes, eventApi], { concurrency: 2 }))
        yield* until(Effect.sync(() => accepted.length >= 20))

        const filled = yield* disk.fill
        expect(filled).toBeGreaterThan(0)
        const acceptedBefore = accepted.length
        const readyz = Effect.map(request("GET", `${first.admin}/readyz`), (answer) => [answer.status, answer.json] as const)

        // "502 | The service could not be reached": writes fail; the public port says so with the Error object.
        yield* until(Effect.sync(() => [...publicAnswers.keys()].some((key) => key.startsWith("[502,"))))
        const [status, body] = yield* readyz
        expect(status).toBe(503)
        expect((body as { error: string }).error).toMatch(
          /^The disk of the embedded database is full \(\d+ MiB free, it needs 16 MiB\): writes fail until space is freed where DATA_DIR is, and the server resumes by itself\.$/
        )
        yield* until(Effect.sync(() => refusedOutcomes.size > 0))
        expect(yield* alive(first.server)).toBe(true)

        yield* disk.free
        // Recovers by itself: ready again, outcomes accepted again, and a new key's subscribe is created.
        yield* until(Effect.map(readyz, ([status]) => status === 200))
        yield* until(Effect.sync(() => accepted.length >= acceptedBefore + 20))
        const fresh = yield* newKey
        expect((yield* subscribe(fresh)).status).toBe(201)
        yield* Fiber.interrupt(load)

        const unavailable = { error: "The service could not reach its database; retry later." }
        for (const key of publicAnswers.keys()) {
          const [status, body] = JSON.parse(key) as [number, unknown]
          expect(CONTRACT_STATUSES).toContain(status)
          if (status === 502) expect(body).toEqual(unavailable)
        }
        // The outcome intake refuses with the same Error object: the call-handling service retries those.
        expect([...refusedOutcomes.keys()]).toEqual([JSON.stringify([502, unavailable])])

        // Nothing accepted is lost, even across a crash: every 202 is there after SIGKILL and a new start.
        const ids = [...accepted]
        yield* Effect.sync(() => process.kill(first.server.pid, "SIGKILL"))
        yield* first.server.exited
        const second = yield* started(disk, env)
        const missing: Array<string> = []
        for (const callId of ids) {
          const answer = yield* adminRequest(second.admin, "GET", `/v1/calls/${callId}/outcome`)
          if (answer.status !== 200) missing.push(`${callId}: ${answer.status}`)
        }
        expect(missing).toEqual([])
        expect(yield* second.server.terminate).toBe(0)
      }),
    PROCESS_TEST_TIMEOUT
  )
})
