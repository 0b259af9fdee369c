/**
 * A small scriptable bridge over real TLS on loopback, for the client tests:
 * REST paths and an MCP endpoint, an OAuth token endpoint, recorded requests,
 * and per-call scripts (a receipt, a raw reply, MCP messages) so each test
 * can make the bridge answer exactly what the rule under test needs.
 */
import * as https from "node:https"
import type { IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Context, Effect, Layer } from "effect"
import { Operations } from "@crm-relay/contract"
import type { TlsMaterial } from "@crm-relay/testing/Certificate"
import { generateTlsMaterial } from "@crm-relay/testing/Certificate"

/** The host name tests use; a static resolver maps it to 127.0.0.1. */
export const BRIDGE_HOST = "bridge.localhost"
/** The MCP endpoint path on the fake. */
export const MCP_PATH = "/mcp"
/** The OAuth token endpoint path on the fake. */
export const TOKEN_PATH = "/oauth/token"
/** The REST base path on the fake. */
export const REST_BASE = "/crm/v1"

/** One request as the fake received it. */
export interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly text: string
  /** The operation it was for (REST path or MCP tool name); undefined for the token endpoint. */
  readonly operation: Operations.OperationName | undefined
  /** The parsed body (JSON), or undefined. */
  readonly json: unknown
}

/** The value at `path` inside a parsed JSON value, or undefined. */
export const at = (json: unknown, ...path: ReadonlyArray<string | number>): unknown => {
  let value = json
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined
    value = (value as Record<string | number, unknown>)[key]
  }
  return value
}

/** A raw HTTP reply. */
export interface RawReply {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
}

/** What the fake answers to the next bridge call. */
export type Script =
  /** 200 with this receipt (REST body, or MCP structuredContent of a complete result). */
  | { readonly receipt: unknown; readonly framing?: "json" | "sse" }
  /** This exact reply, whatever the transport. */
  | { readonly raw: RawReply }
  /** MCP only: these JSON-RPC messages (given the request id) as SSE events, or the first as a JSON body. */
  | { readonly messages: (id: string) => ReadonlyArray<unknown>; readonly framing: "json" | "sse" }
  /** MCP only: this exact event-stream text (given the request id). */
  | { readonly sseText: (id: string) => string }

/** What the token endpoint answers to the next grant. */
export type TokenScript = { readonly expiresIn?: number | undefined } | { readonly raw: RawReply }

/** The fake bridge: its URLs, the recorded requests and the script queues. */
export interface FakeBridgeState {
  readonly tls: TlsMaterial
  readonly origin: string
  readonly restUrl: string
  readonly mcpUrl: string
  readonly tokenUrl: string
  /** Bridge requests (REST and MCP), in arrival order. */
  readonly requests: Array<Recorded>
  /** Token endpoint requests, in arrival order. */
  readonly tokenRequests: Array<Recorded>
  /** Scripts for the next bridge calls, consumed in order; when empty a valid default receipt is answered. */
  readonly scripts: Array<Script>
  /** Scripts for the next grants; when empty a token with `defaultExpiresIn` is issued. */
  readonly tokenScripts: Array<TokenScript>
  /** Bearer credentials the bridge accepts: the API key and every issued token. */
  readonly accepted: Set<string>
  /** The default `expires_in` of issued tokens (undefined: omitted). */
  defaultExpiresIn: number | undefined
  /** The default MCP framing. */
  defaultFraming: "json" | "sse"
  /** Forgets requests, scripts and issued tokens; keeps the API key. */
  readonly reset: () => void
}

/** The API key the fake accepts. */
export const API_KEY = "test-api-key_0123456789"
/** The OAuth client the token endpoint accepts. */
export const CLIENT_ID = "crm relay:client"
export const CLIENT_SECRET = "s3cret&p@ss word"

const readBody = (req: NodeJS.ReadableStream): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** A valid receipt for `operation` given its request object. */
export const defaultReceipt = (operation: Operations.OperationName, request: unknown): unknown => {
  switch (operation) {
    case "capabilities":
      return {
        contract_version: "svc.crm.v1",
        operations: [...Operations.OPERATIONS],
        booking_closes_availability: true
      }
    case "contacts.search":
      return { contact: null }
    case "contacts.upsert":
      return { id: "contact-1", is_new: true }
    case "availability.list":
      return { slots: [] }
    case "appointments.create":
      return {
        id: "appt-1",
        confirmed: true,
        start: at(request, "appointment", "start"),
        end: at(request, "appointment", "end"),
        timezone: at(request, "appointment", "timezone")
      }
    case "leads.create":
      return { id: "lead-1" }
  }
}

const OPERATION_BY_PATH = new Map<string, Operations.OperationName>(
  Operations.OPERATIONS.map((op) => [`${REST_BASE}${Operations.REST_PATHS[op]}`, op])
)

const sse = (messages: ReadonlyArray<unknown>): string =>
  messages.map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join("")

const complete = (id: string, receipt: unknown) => ({
  jsonrpc: "2.0",
  id,
  result: {
    resultType: "complete",
    content: [{ type: "text", text: JSON.stringify(receipt) }],
    structuredContent: receipt,
    isError: false
  }
})

/** The running fake bridge. */
export class FakeBridge extends Context.Tag("test/FakeBridge")<FakeBridge, FakeBridgeState>() {}

/** Starts the fake on 127.0.0.1 (port chosen by the OS) for the scope's lifetime. */
export const layer: Layer.Layer<FakeBridge> = Layer.scoped(
  FakeBridge,
  Effect.gen(function*() {
    const tls = yield* Effect.orDie(generateTlsMaterial())
    let tokenCounter = 0
    const fake: FakeBridgeState = {
      tls,
      origin: "",
      restUrl: "",
      mcpUrl: "",
      tokenUrl: "",
      requests: [],
      tokenRequests: [],
      scripts: [],
      tokenScripts: [],
      accepted: new Set([API_KEY]),
      defaultExpiresIn: 3600,
      defaultFraming: "json",
      reset: () => {
        tokenCounter = 0
        fake.requests.length = 0
        fake.tokenRequests.length = 0
        fake.scripts.length = 0
        fake.tokenScripts.length = 0
        fake.accepted.clear()
        fake.accepted.add(API_KEY)
        fake.defaultExpiresIn = 3600
        fake.defaultFraming = "json"
      }
    }

    const reply = (res: import("node:http").ServerResponse, r: RawReply) => {
      res.writeHead(r.status, { ...r.headers })
      res.end(r.body ?? "")
    }

    const token = (recorded: Recorded, res: import("node:http").ServerResponse) => {
      fake.tokenRequests.push(recorded)
      const script = fake.tokenScripts.shift() ?? { expiresIn: fake.defaultExpiresIn }
      if ("raw" in script) return reply(res, script.raw)
      tokenCounter += 1
      const accessToken = `tok-${tokenCounter}`
      fake.accepted.add(accessToken)
      const body: Record<string, unknown> = { access_token: accessToken, token_type: "Bearer" }
      if (script.expiresIn !== undefined) body["expires_in"] = script.expiresIn
      reply(res, { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    }

    const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      readBody(req).then((text) => {
        const path = req.url ?? "/"
        const json = parse(text)
        const isMcp = path === MCP_PATH
        const operation = isMcp
          ? (Operations.OPERATION_BY_TOOL as Record<string, Operations.OperationName | undefined>)[String(at(json, "params", "name"))]
          : OPERATION_BY_PATH.get(path)
        const recorded: Recorded = { method: req.method ?? "", path, headers: req.headers, text, operation, json }
        if (path === TOKEN_PATH) return token(recorded, res)
        fake.requests.push(recorded)
        const script = fake.scripts.shift()
        if (script !== undefined && "raw" in script) return reply(res, script.raw)
        const bearer = (req.headers.authorization ?? "").replace(/^Bearer /, "")
        if (!fake.accepted.has(bearer)) return reply(res, { status: 401 })
        if (operation === undefined) return reply(res, { status: 404 })
        const request = isMcp ? at(json, "params", "arguments") : json
        if (!isMcp) {
          const receipt = script !== undefined && "receipt" in script ? script.receipt : defaultReceipt(operation, request)
          return reply(res, { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(receipt) })
        }
        const id = String(at(json, "id"))
        if (script !== undefined && "sseText" in script) {
          return reply(res, { status: 200, headers: { "content-type": "text/event-stream" }, body: script.sseText(id) })
        }
        const framing = script !== undefined && "framing" in script && script.framing !== undefined
          ? script.framing
          : fake.defaultFraming
        const messages = script !== undefined && "messages" in script
          ? script.messages(id)
          : [complete(id, script !== undefined && "receipt" in script ? script.receipt : defaultReceipt(operation, request))]
        return framing === "sse"
          ? reply(res, { status: 200, headers: { "content-type": "text/event-stream" }, body: sse(messages) })
          : reply(res, { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(messages[0]) })
      }, () => reply(res, { status: 500 }))
    })

    // Idle keep-alive connections stay open until the client drops them: a server closing one just as the
    // client reuses it (likely on a loaded machine) would fail an exchange that no test is about.
    server.keepAliveTimeout = 0
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const origin = `https://${BRIDGE_HOST}:${port}`
    Object.assign(fake, {
      origin,
      restUrl: `${origin}${REST_BASE}`,
      mcpUrl: `${origin}${MCP_PATH}`,
      tokenUrl: `${origin}${TOKEN_PATH}`
    })
    return fake
  })
)

/** The MCP "complete" result message for `receipt`. */
export const completeResult = complete
