/**
 * A crm-relay server on loopback (ports chosen by the system) over the test
 * database, with helpers to seed accounts and keys and to make raw HTTP
 * requests (exact headers and bodies, as an automation platform sends them).
 */
import { expect } from "@effect/vitest"
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import { Database, TestDatabase } from "@crm-relay/store"
import { Context, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import * as MasterKey from "../../src/config/MasterKey.js"
import * as Server from "../../src/http/Server.js"

/** The admin token of test servers. */
export const ADMIN_TOKEN = "test-admin-token-0123456789"

/**
 * A server over the database of the context: ROLE all, both APIs on
 * 127.0.0.1 with ports chosen by the system, the test admin token, no
 * server.json; `options` override any of these (role, bridge side, master keys).
 */
export const layerServer = (options: Partial<Server.ServeOptions> = {}) =>
  Server.layerWithDatabase({
    role: "all",
    port: 0,
    publicHost: "127.0.0.1",
    adminHost: "127.0.0.1",
    adminPort: 0,
    adminToken: Redacted.make(ADMIN_TOKEN),
    dataDir: Option.none(),
    ...options
  })

/** Builds `server` afresh for the scope and answers its base URLs (`public` and `portal` are "" when it serves none). */
export const start = <E, R>(server: Layer.Layer<Server.Listening, E, R>) =>
  Effect.map(Layer.build(Layer.fresh(server)), (context) => {
    const listening = Context.get(context, Server.Listening)
    return {
      public: Option.getOrUndefined(listening.publicApi)?.url ?? "",
      admin: listening.internalApi.url,
      portal: Option.getOrUndefined(listening.portal)?.url ?? ""
    }
  })

/** `server` as another replica over the test database of the context: its own pool on PostgreSQL, the one PGlite session otherwise. */
export const replica = <A, E, R>(server: Layer.Layer<A, E, R>) =>
  Effect.map(TestDatabase.TestDatabase, (db) =>
    db.kind === "postgres"
      ? server.pipe(Layer.provide(Database.layerPostgres({ url: Option.getOrThrow(db.url), poolSize: 4 })))
      : server)

/**
 * A test file's harness (the servers, receivers and brokers it builds itself) over what its servers
 * need: the process-local master key, a fresh test database, and no logs.
 */
export const harnessOver = <A, E, R>(harness: Layer.Layer<A, E, R>) =>
  harness.pipe(
    Layer.provideMerge(Server.servicesWith(MasterKey.processLocal)),
    Layer.provideMerge(TestDatabase.layer),
    Layer.provideMerge(Logger.minimumLogLevel(LogLevel.None))
  )

/** A server over a fresh test database. */
export const TestServerLive = layerServer().pipe(Layer.provideMerge(TestDatabase.layer))

/** The public and internal base URLs of the server in the context. */
export const urls = Effect.map(Server.Listening, (listening) => ({
  public: Option.getOrThrow(listening.publicApi).url,
  admin: listening.internalApi.url
}))

/** A new account with one integration key. */
export const accountWithKey = (mode: Accounts.AccountMode = "live") =>
  Effect.gen(function*() {
    const account = yield* (yield* Accounts.Accounts).create({ name: "Test account", mode })
    const created = yield* (yield* IntegrationKeys.IntegrationKeys).create(account.id)
    return { accountId: account.id, keyId: created.id, key: Redacted.value(created.key) }
  })

/** An HTTP answer, read completely. */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: unknown
}

/** One raw HTTP request (no retries, no redirects). */
export const request = (
  method: string,
  url: string,
  options: { readonly headers?: Record<string, string>; readonly body?: string | Uint8Array } = {}
): Effect.Effect<Answer> =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method,
      redirect: "manual",
      ...(options.headers !== undefined ? { headers: options.headers } : {}),
      ...(options.body !== undefined ? { body: options.body } : {})
    })
    const text = await response.text()
    let json: unknown = undefined
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

/** Internal API requests to the server of a harness that holds the server's base URL as `admin`. */
export const adminOf = <I, S extends { readonly admin: string }>(harness: Context.Tag<I, S>) =>
(method: string, path: string, body?: unknown): Effect.Effect<Answer, never, I> =>
  Effect.flatMap(harness, (h) => adminRequest(h.admin, method, path, body))

/** Headers of an internal API request: the test admin token, and a JSON body. */
export const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }

/** One internal API request to the server at `base`; `body` goes as JSON (a string as it is). */
export const adminRequest = (base: string, method: string, path: string, body?: unknown): Effect.Effect<Answer> =>
  request(method, `${base}${path}`, {
    headers: adminHeaders,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })

/** Authorization header for an integration key. */
export const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** JSON request headers with a key. */
export const jsonWith = (key: string) => ({ ...bearer(key), "content-type": "application/json" })

/** A call outcome of `accountId` classified as a lead (one delivery per lead subscription), `extra` over it. */
export const leadOutcome = (accountId: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  account_id: accountId,
  tenant_id: "t-1",
  classification: "lead",
  source: "Acme Receptionist (phone)",
  tags: [],
  caller: {
    full_name: "Ada Lovelace",
    first_name: "Ada",
    last_name: "Lovelace",
    phones: ["+1 555 0100"],
    emails: ["ada@example.com"],
    address: "1 Analytical Way"
  },
  lead: { job_type: "Boiler repair", summary: "No hot water", notes: "", urgency: "normal" },
  ...extra
})

/** The requests of one series (`api`, `method`, `route`, `status`) the server in the context counted, scraped from /metrics. */
export const requestsCounted = (series: Readonly<Record<string, string>>) =>
  Effect.flatMap(urls, (u) =>
    Effect.map(
      request("GET", `${u.admin}/metrics`, { headers: bearer(ADMIN_TOKEN) }),
      (scraped) =>
        Number(
          parsePrometheusTextFormat(scraped.text).find((f) => f.name === "crm_relay_http_requests_total")?.metrics
            .find((m) => Object.entries(series).every(([k, v]) => m.labels?.[k] === v))?.value ?? 0
        )
    ))

/**
 * Expects `line` to be the access line the router writes for a request answered as `answered`
 * (API, method, status): its message, a duration, the trace ids, and nothing of `secret`.
 */
export const expectAccessLine = (
  line: Record<string, unknown>,
  answered: { readonly api: string; readonly method: string; readonly status: number },
  secret: string
): void => {
  expect(line).toMatchObject({ level: "info", msg: "http request", ...answered })
  expect(typeof line["duration_ms"]).toBe("number")
  expect(line["trace_id"]).toMatch(/^[0-9a-f]{32}$/)
  expect(line["span_id"]).toMatch(/^[0-9a-f]{16}$/)
  expect(JSON.stringify(line)).not.toContain(secret)
}
