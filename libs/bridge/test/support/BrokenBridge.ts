/**
 * Deliberately broken bridges for the conformance tests: the reference bridge
 * (apps/reference-bridge) behind a real HTTPS proxy on loopback
 * (`broken.localhost`) that bends exactly one rule — accepts a request
 * without a credential, ignores tenant binding, hands out MCP sessions,
 * forgets idempotency keys, double-books a slot, ... — and forwards
 * everything else unchanged. Plus the egress, token cache and registry a
 * conformance run needs toward both.
 */
import { randomBytes } from "node:crypto"
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import { Context, Effect, Layer, Redacted } from "effect"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { Certificate } from "@crm-relay/testing"
import type { Connection } from "../../src/Connection.js"
import { DnsResolver } from "../../src/DnsResolver.js"
import { Egress } from "../../src/Egress.js"
import { TokenCache } from "../../src/TokenCache.js"
import { TransportRegistry } from "../../src/TransportRegistry.js"
import { onLiveClock } from "./Harness.js"
import { HOST, TENANTS } from "./Reference.js"

/** The proxy's host name (pinned to 127.0.0.1). */
export const BROKEN_HOST = "broken.localhost"

/** A request as the proxy sees it; `body` parsed as JSON when it is JSON. */
export interface ProxyRequest {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: unknown
}

/** An answer as the proxy passes it on. */
export interface ProxyAnswer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/** How a broken bridge bends the reference bridge: rewrite the request, answer itself, or rewrite the answer. */
export interface Breakage {
  readonly request?: (request: ProxyRequest) => ProxyRequest | ProxyAnswer
  readonly answer?: (request: ProxyRequest, answer: ProxyAnswer) => ProxyAnswer
}

/** The running proxy: its URLs and the breakage in force (set per test). */
export interface BrokenBridgeHandle {
  readonly restBaseUrl: string
  readonly mcpUrl: string
  readonly ca: string
  readonly set: (breakage: Breakage) => Effect.Effect<void>
}

export class BrokenBridge extends Context.Tag("test/BrokenBridge")<BrokenBridge, BrokenBridgeHandle>() {}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The operation's arguments: the REST body, or the MCP `params.arguments`. */
export const argumentsOf = (request: ProxyRequest): Record<string, unknown> | undefined => {
  if (!isRecord(request.body)) return undefined
  const params = request.body["params"]
  return isRecord(params) && isRecord(params["arguments"]) ? params["arguments"] : request.body
}

/** The operation a request is for: the REST path suffix or the MCP tool name. */
export const operationOf = (request: ProxyRequest): string => {
  const tool = request.headers["mcp-name"]
  return tool ?? request.path.replace(/^\/crm/, "")
}

/** The request with its arguments replaced by `f(arguments)`. */
export const withArguments = (request: ProxyRequest, f: (args: Record<string, unknown>) => Record<string, unknown>): ProxyRequest => {
  const body = request.body
  if (!isRecord(body)) return request
  const params = body["params"]
  if (isRecord(params) && isRecord(params["arguments"])) {
    return { ...request, body: { ...body, params: { ...params, arguments: f(params["arguments"]) } } }
  }
  return { ...request, body: f(body) }
}

const flatHeaders = (headers: IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

const HOP = new Set(["content-length", "transfer-encoding", "connection", "keep-alive", "host"])

const start = (bridge: ReferenceBridge.ReferenceBridgeHandle, tls: Certificate.TlsMaterial) =>
  Effect.acquireRelease(
    Effect.async<{ server: https.Server; port: number; state: { breakage: Breakage } }, Error>((resume) => {
      const state: { breakage: Breakage } = { breakage: {} }
      const forward = (request: ProxyRequest, raw: Buffer, rewritten: boolean) =>
        new Promise<ProxyAnswer>((resolve, reject) => {
          const payload = rewritten ? Buffer.from(JSON.stringify(request.body)) : raw
          const headers: OutgoingHttpHeaders = {}
          for (const [name, value] of Object.entries(request.headers)) if (!HOP.has(name)) headers[name] = value
          headers["content-length"] = String(payload.length)
          headers["host"] = `${HOST}:${bridge.port}`
          const out = https.request({
            host: "127.0.0.1",
            port: bridge.port,
            servername: HOST,
            ca: bridge.ca,
            method: "POST",
            path: request.path,
            headers
          }, (res) => {
            const chunks: Array<Buffer> = []
            res.on("data", (chunk: Buffer) => chunks.push(chunk))
            res.on("end", () =>
              resolve({ status: res.statusCode ?? 502, headers: flatHeaders(res.headers), body: Buffer.concat(chunks).toString("utf8") }))
            res.on("error", reject)
          })
          out.on("error", reject)
          out.end(payload)
        })
      const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const raw = Buffer.concat(chunks)
          let body: unknown = undefined
          try {
            body = JSON.parse(raw.toString("utf8"))
          } catch {
            body = undefined
          }
          const original: ProxyRequest = { path: req.url ?? "/", headers: flatHeaders(req.headers), body }
          const breakage = state.breakage
          const bent = breakage.request === undefined ? original : breakage.request(original)
          const answered: Promise<ProxyAnswer> = "status" in bent
            ? Promise.resolve(bent)
            : forward(bent, raw, bent !== original).then((answer) =>
              breakage.answer === undefined ? answer : breakage.answer(bent, answer)
            )
          answered.then(
            (answer) => {
              const headers: OutgoingHttpHeaders = {}
              for (const [name, value] of Object.entries(answer.headers)) if (!HOP.has(name)) headers[name] = value
              headers["content-length"] = String(Buffer.byteLength(answer.body))
              res.writeHead(answer.status, headers)
              res.end(answer.body)
            },
            () => {
              res.writeHead(502)
              res.end()
            }
          )
        })
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ server, port: (server.address() as net.AddressInfo).port, state })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/**
 * The reference bridge, the broken proxy in front of it, and egress that trusts and reaches both.
 * One CA signs both certificates: two throwaway CAs would share a subject name.
 */
export const layer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const ca = yield* Certificate.generateAuthority()
    const bridgeCert = yield* Certificate.issue(ca, { dnsNames: [HOST], ips: ["127.0.0.1"] })
    const proxyCert = yield* Certificate.issue(ca, { dnsNames: [BROKEN_HOST], ips: ["127.0.0.1"] })
    const proxied = Layer.unwrapScoped(
      Effect.gen(function*() {
        const bridge = yield* ReferenceBridge.ReferenceBridge
        const proxy = yield* start(bridge, { ca: ca.cert, ...proxyCert })
        const origin = `https://${BROKEN_HOST}:${proxy.port}`
        const handle: BrokenBridgeHandle = {
          restBaseUrl: `${origin}/crm`,
          mcpUrl: `${origin}/mcp`,
          ca: ca.cert,
          set: (breakage) =>
            Effect.sync(() => {
              proxy.state.breakage = breakage
            })
        }
        return Layer.mergeAll(
          Layer.succeed(BrokenBridge, handle),
          Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: ca.cert }).pipe(
            Layer.provide(DnsResolver.layerStatic({ [HOST]: ["127.0.0.1"], [BROKEN_HOST]: ["127.0.0.1"] }))
          ).pipe(onLiveClock),
          TokenCache.Default,
          TransportRegistry.Default
        )
      })
    )
    return proxied.pipe(
      Layer.provideMerge(ReferenceBridge.layer({
        urlHost: HOST,
        tls: { ca: ca.cert, ...bridgeCert },
        tenants: [
          {
            tenantId: TENANTS.main.tenantId,
            apiKey: TENANTS.main.apiKey,
            oauth: { clientId: TENANTS.main.clientId, clientSecret: TENANTS.main.clientSecret, expiresIn: TENANTS.main.expiresIn }
          },
          { tenantId: TENANTS.other.tenantId, apiKey: TENANTS.other.apiKey }
        ]
      }))
    )
  })
).pipe(Layer.orDie)

/** A connection of tenant t-1 to `target` (the reference bridge or the broken proxy) over `transport` with `auth`. */
export const connection = (
  bridge: ReferenceBridge.ReferenceBridgeHandle,
  target: { readonly restBaseUrl: string; readonly mcpUrl: string },
  spec: { readonly transport: "rest" | "mcp"; readonly auth: "api_key" | "oauth" }
): Connection => ({
  accountId: "account-1",
  tenantId: TENANTS.main.tenantId,
  version: 1,
  transport: { kind: spec.transport, url: spec.transport === "rest" ? target.restBaseUrl : target.mcpUrl },
  auth: spec.auth === "api_key"
    ? { type: "api_key", key: Redacted.make(TENANTS.main.apiKey) }
    : {
      type: "oauth",
      tokenUrl: bridge.tokenUrl,
      clientId: TENANTS.main.clientId,
      clientSecret: Redacted.make(TENANTS.main.clientSecret)
    }
})

/** Tenant t-2's credential, for the tenant-binding check. */
export const otherTenant = {
  tenantId: TENANTS.other.tenantId,
  auth: { type: "api_key" as const, key: Redacted.make(TENANTS.other.apiKey) }
}

/** A fresh 64-hex key, for breakages that forget keys. */
export const randomKey = (): string => randomBytes(32).toString("hex")
