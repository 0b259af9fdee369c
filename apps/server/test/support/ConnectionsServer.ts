/**
 * A crm-relay server on loopback whose egress reaches the reference bridge
 * (real TLS, `bridge.localhost` pinned to 127.0.0.1, its CA trusted,
 * loopback allowed as EGRESS_ALLOW_PRIVATE would), over a test database,
 * with helpers for the internal API.
 */
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import * as TestTenants from "@crm-relay/reference-bridge/TestTenants"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as Server from "../../src/http/Server.js"
import { BRIDGE_HOST, bridgeSide } from "./LoopbackEgress.js"
import { adminRequest, type Answer, layerServer as testServer } from "./TestServer.js"

export const HOST = BRIDGE_HOST

/** The bridge's tenants: t-1 with an API key and an OAuth client, t-2 with a key only. */
export const { OTHER, TENANT } = TestTenants

/** The reference bridge serving TENANT and OTHER. */
export const BridgeLive = TestTenants.layer(HOST)

/** The MASTER_KEY of every server in these tests (replicas share it). */
export const masterKeys = Vault.randomMasterKeys()

/** Every log line of the servers built with {@link layerServer}, to look for secrets. */
export const logLines: Array<string> = []

const captureLogger = Logger.make(({ annotations, cause, message }) => {
  logLines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations), cause: String(cause) }))
})

/** A server over the database and bridge of the context, logging everything into {@link logLines}. */
export const layerServer = Layer.unwrapEffect(
  Effect.map(ReferenceBridge.ReferenceBridge, (bridge) => testServer({ role: "api", bridge: bridgeSide([bridge.ca]), masterKeys }))
).pipe(
  Layer.provide(Logger.replace(Logger.defaultLogger, captureLogger)),
  Layer.provide(Logger.minimumLogLevel(LogLevel.All))
)

/** A server, its test database and the reference bridge. */
export const Live = layerServer.pipe(Layer.provideMerge(TestDatabase.layer), Layer.provideMerge(BridgeLive))

/** The internal API's base URL of the server in the context. */
export const adminUrl = Effect.map(Server.Listening, (listening) => listening.internalApi.url)

/** Every answer of the internal API in these tests, to look for secrets. */
export const answers: Array<string> = []

/** One internal API request with the admin token (JSON body when given). */
export const admin = (method: string, path: string, body?: unknown, base?: string): Effect.Effect<Answer, never, Server.Listening> =>
  Effect.gen(function*() {
    const answer = yield* adminRequest(base ?? (yield* adminUrl), method, path, body)
    answers.push(answer.text)
    return answer
  })

/** A new account of `mode`, created through the internal API. */
export const account = (mode: "live" | "demo" | "sandbox" = "live") =>
  Effect.map(admin("POST", "/v1/accounts", { name: `Test ${mode}`, mode }), (answer) => (answer.json as { id: string }).id)

/** The connection form body for tenant t-1 over `transport` with `auth`. */
export const form = (
  bridge: ReferenceBridge.ReferenceBridgeHandle,
  transport: "rest" | "mcp",
  auth: "api_key" | "oauth"
) => ({
  transport,
  url: transport === "rest" ? bridge.restBaseUrl : bridge.mcpUrl,
  auth: auth === "api_key"
    ? { type: "api_key", key: TENANT.apiKey }
    : { type: "oauth", token_url: bridge.tokenUrl, client_id: TENANT.clientId, client_secret: TENANT.clientSecret }
})

/** The requests the bridge received on its bridge transports since it had received `mark` in all. */
export const bridgeRequestsSince = (mark: number) =>
  Effect.flatMap(ReferenceBridge.ReferenceBridge, (bridge) =>
    Effect.map(bridge.control.received, (all) => all.slice(mark).filter((r) => r.transport !== "oauth")))

/** How many requests the bridge has received so far (a mark for {@link bridgeRequestsSince}). */
export const mark = Effect.flatMap(ReferenceBridge.ReferenceBridge, (bridge) => Effect.map(bridge.control.received, (r) => r.length))
