import { describe, expect, it } from "@effect/vitest"
import { FetchHttpClient } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { AdminOperations, layerRemote } from "../src/cli/AdminOperations.js"
import { Readiness } from "../src/http/Readiness.js"
import * as Server from "../src/http/Server.js"
import { ADMIN_TOKEN, adminHeaders as admin, bearer, layerServer, request, TestServerLive, urls } from "./support/TestServer.js"
const isUuid = Schema.is(Schema.UUID)

const post = (path: string, body?: unknown, headers: Record<string, string> = admin) =>
  Effect.flatMap(urls, (u) =>
    request("POST", `${u.admin}${path}`, { headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) }))

describe("internal API", () => {
  it.layer(TestServerLive)((it) => {
    it.effect("POST /v1/accounts {name, mode} → 201 {id, name, mode}; mode defaults to live", () =>
      Effect.gen(function*() {
        const created = yield* post("/v1/accounts", { name: "Acme Plumbing", mode: "sandbox" })
        expect(created.status).toBe(201)
        expect(created.json).toMatchObject({ name: "Acme Plumbing", mode: "sandbox" })
        expect(isUuid((created.json as { id: string }).id)).toBe(true)
        expect((yield* post("/v1/accounts", { name: "  Trimmed  " })).json).toMatchObject({ name: "Trimmed", mode: "live" })
      }))

    it.effect("POST /v1/accounts refuses a bad body with 400 and the Error object", () =>
      Effect.gen(function*() {
        for (const [body, error] of [
          [{ mode: "live" }, "name is required."],
          [{ name: "" }, "name must not be empty."],
          [{ name: "x".repeat(201) }, "name must be at most 200 characters."],
          [{ name: "A", mode: "production" }, "mode must be one of: live, demo, sandbox."]
        ] as const) {
          const answer = yield* post("/v1/accounts", body)
          expect(answer.status).toBe(400)
          expect(answer.json).toEqual({ error })
        }
      }))

    it.effect("Integration key: POST /v1/accounts/{id}/keys → 201 {id, key}; the key works on the public API; unknown account → 404", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const account = (yield* post("/v1/accounts", { name: "A" })).json as { id: string }
        const created = yield* post(`/v1/accounts/${account.id}/keys`)
        expect(created.status).toBe(201)
        const { id, key } = created.json as { id: string; key: string }
        expect(isUuid(id)).toBe(true)
        expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key) })).status).toBe(200)
        for (const unknown of ["0f8fad5b-d9cb-469f-a165-70867728950e", "nope"]) {
          const missing = yield* post(`/v1/accounts/${unknown}/keys`)
          expect([missing.status, missing.json]).toEqual([404, { error: "No account with this id exists." }])
        }
      }))

    it.effect("POST /v1/keys/{keyId}/disable → 204; the key then gets 401; unknown key → 404", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const account = (yield* post("/v1/accounts", { name: "A" })).json as { id: string }
        const { id, key } = (yield* post(`/v1/accounts/${account.id}/keys`)).json as { id: string; key: string }
        const disabled = yield* post(`/v1/keys/${id}/disable`)
        expect([disabled.status, disabled.text]).toEqual([204, ""])
        expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(key) })).status).toBe(401)
        const missing = yield* post("/v1/keys/0f8fad5b-d9cb-469f-a165-70867728950e/disable")
        expect([missing.status, missing.json]).toEqual([404, { error: "No integration key with this id exists." }])
      }))

    it.effect("Bearer ADMIN_TOKEN is required (401 Error object); health probes need none", () =>
      Effect.gen(function*() {
        const u = yield* urls
        for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: `Basic ${ADMIN_TOKEN}` }]) {
          const answer = yield* post("/v1/accounts", { name: "A" }, { ...headers, "content-type": "application/json" })
          expect([answer.status, answer.json]).toEqual([401, { error: "The admin token is missing or wrong." }])
        }
        expect((yield* request("GET", `${u.admin}/healthz`)).json).toEqual({ status: "ok" })
        const ready = yield* request("GET", `${u.admin}/readyz`)
        expect(ready.status).toBe(200)
        expect(ready.json).toMatchObject({ status: "ready" })
      }))

    it.scoped("GET /readyz is 200 only once every listener is up, and 503 with the reason from the moment a stop begins", () =>
      Effect.gen(function*() {
        const built = yield* Layer.build(Layer.fresh(layerServer()))
        const listening = Context.get(built, Server.Listening)
        const readyz = Effect.map(request("GET", `${listening.internalApi.url}/readyz`), (r) => [r.status, r.json])
        // Built means the public port listens too: the phase turned to serving after it.
        expect(Option.isSome(listening.publicApi)).toBe(true)
        expect(yield* readyz).toEqual([200, { status: "ready", database: expect.any(String) }])
        yield* Context.get(built, Readiness).stopping
        expect(yield* readyz).toEqual([503, { error: "The server is stopping: it takes no new work." }])
        expect((yield* request("GET", `${listening.internalApi.url}/healthz`)).status).toBe(200)
      }))

    it.effect("unknown internal paths and methods are 404 with the Error object; the public API's paths are not served here", () =>
      Effect.gen(function*() {
        const u = yield* urls
        for (const [method, path] of [["PATCH", "/v1/accounts"], ["DELETE", "/v1/accounts"], ["GET", "/perform-list"], ["GET", "/nope"]] as const) {
          const answer = yield* request(method, `${u.admin}${path}`, { headers: admin })
          expect([method, path, answer.status, answer.json]).toEqual([
            method,
            path,
            404,
            { error: "Not found: this path or method is not part of the internal API." }
          ])
        }
      }))

    it.effect("the CLI's client (HttpApiClient of InternalApi) drives the same routes", () =>
      Effect.gen(function*() {
        const u = yield* urls
        const operations = yield* AdminOperations.pipe(
          Effect.provide(layerRemote(u.admin, Redacted.make(ADMIN_TOKEN)).pipe(Layer.provide(FetchHttpClient.layer)))
        )
        expect(operations.via).toBe("server")
        const account = yield* operations.createAccount({ name: "Via client", mode: "demo" })
        expect(account).toMatchObject({ name: "Via client", mode: "demo" })
        const key = yield* operations.createKey(account.id)
        expect((yield* request("GET", `${u.public}/perform-list`, { headers: bearer(Redacted.value(key.key)) })).status).toBe(200)
        yield* operations.disableKey(key.id)
        expect(yield* operations.migrate).toEqual([])
        expect(yield* operations.createKey("0f8fad5b-d9cb-469f-a165-70867728950e").pipe(Effect.flip)).toMatchObject({
          message: "No account with this id exists."
        })
        const wrong = yield* AdminOperations.pipe(
          Effect.provide(layerRemote(u.admin, Redacted.make("wrong")).pipe(Layer.provide(FetchHttpClient.layer)))
        )
        expect((yield* wrong.createAccount({ name: "x", mode: "live" }).pipe(Effect.flip)).message).toContain("refused the admin token")
      }))
  })
})
