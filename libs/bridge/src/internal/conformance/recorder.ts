/**
 * The conformance check's view of the wire: an Egress Layer in front of the
 * real one that records every exchange (status, headers, body, duration or
 * failure), and renders it as redacted evidence — never a credential, never
 * the bridge's own prose.
 */
import { Effect, FiberRef, Ref } from "effect"
import type { Conformance } from "@crm-relay/contract"
import type { Egress, EgressError, EgressRequest, EgressResponse } from "../../Egress.js"

/** One recorded exchange. */
export interface Exchange {
  readonly purpose: string
  readonly url: string
  readonly requestHeaders: Readonly<Record<string, string>>
  readonly requestBody: string
  /** The check removed the Authorization header (the "no credential" probe). */
  readonly withoutCredential: boolean
  /** The check meant the bridge to refuse this request (a taken slot, a wrong credential): no success to judge. */
  readonly expectsRefusal: boolean
  readonly response: EgressResponse | undefined
  readonly error: EgressError | undefined
  readonly durationMs: number
}

/** When set, the next exchanges of this fiber go out without an Authorization header. */
const stripCredential = FiberRef.unsafeMake(false)

/** Runs `effect` with every exchange it makes sent without an Authorization header. */
export const withoutCredential = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, stripCredential, true)

/** When set, the exchanges of this fiber are requests the check means the bridge to refuse. */
const refusalExpected = FiberRef.unsafeMake(false)

/** Runs `effect` with every exchange it makes recorded as one the bridge should refuse (so `mcp.tool_result` leaves it alone). */
export const expectingRefusal = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, refusalExpected, true)

const decoder = new TextDecoder()

const textOf = (body: EgressRequest["body"]): string =>
  body === undefined ? "" : typeof body === "string" ? body : decoder.decode(body)

// Header values the evidence may show: never Authorization.
const publicHeaders = (headers: EgressRequest["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name === "authorization") continue
    if (typeof value === "string") out[name] = value
  }
  return out
}

/** A recording Egress over `egress`, and the exchanges it has seen. */
export const make = (egress: Egress["Type"]) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<Exchange>>([])
    const clock = yield* Effect.clock
    const send = (request: EgressRequest): Effect.Effect<EgressResponse, EgressError> =>
      Effect.gen(function*() {
        const strip = yield* FiberRef.get(stripCredential)
        const expectsRefusal = yield* FiberRef.get(refusalExpected)
        const headers = { ...(request.headers ?? {}) }
        if (strip) delete headers["authorization"]
        const started = clock.unsafeCurrentTimeNanos()
        const exit = yield* Effect.exit(egress.send({ ...request, headers }))
        const durationMs = Number(clock.unsafeCurrentTimeNanos() - started) / 1e6
        const base = {
          purpose: request.options?.purpose ?? "unspecified",
          url: request.url,
          requestHeaders: publicHeaders(headers),
          requestBody: textOf(request.body),
          withoutCredential: strip,
          expectsRefusal,
          durationMs
        }
        const recorded: Exchange = exit._tag === "Success"
          ? { ...base, response: exit.value, error: undefined, durationMs: exit.value.durationMs }
          : {
            ...base,
            response: undefined,
            error: exit.cause._tag === "Fail" ? exit.cause.error : undefined
          }
        yield* Ref.update(log, (all) => [...all, recorded])
        return yield* exit
      })
    return {
      egress: { send } satisfies Egress["Type"],
      exchanges: Ref.get(log)
    }
  })

// ---------------------------------------------------------------------------
// Redaction
// ---------------------------------------------------------------------------

// Identifiers, instants, zones, versions and operation names; anything with spaces or quotes is prose.
const SAFE_STRING = /^[A-Za-z0-9_.:+\-/@]{0,80}$/
const MAX_ITEMS = 3
const MAX_TEXT = 600

/** The bridge's JSON with its free text replaced by a length: remote prose never reaches a report. */
export const redactRemote = (value: unknown): unknown => {
  if (typeof value === "string") return SAFE_STRING.test(value) ? value : `<text, ${value.length} chars>`
  if (Array.isArray(value)) {
    const shown = value.slice(0, MAX_ITEMS).map(redactRemote)
    return value.length > MAX_ITEMS ? [...shown, `<${value.length - MAX_ITEMS} more>`] : shown
  }
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [SAFE_STRING.test(k) ? k : "<key>", redactRemote(v)]))
  }
  return value
}

const clip = (text: string): string => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text)

const mediaType = (response: EgressResponse): string =>
  (response.headers["content-type"] ?? "no content type").split(";")[0]!.trim()

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

// A JSON-RPC answer reads as what the checks judge: id, resultType, isError and structuredContent (or the error code).
const jsonRpcText = (message: unknown): string => {
  if (!isRecord(message) || !("jsonrpc" in message)) return JSON.stringify(redactRemote(message))
  const m = message
  const id = `id=${JSON.stringify(redactRemote(m["id"]))}`
  if ("method" in m) return `${"id" in m ? "server request" : "notification"} ${JSON.stringify(redactRemote(m["method"]))}`
  const error = m["error"]
  if (isRecord(error)) return `${id} error code ${JSON.stringify(redactRemote(error["code"]))}`
  const r = m["result"]
  if (!isRecord(r)) return `${id} ${JSON.stringify(redactRemote(m))}`
  return `${id} resultType=${JSON.stringify(redactRemote(r["resultType"]))} isError=${"isError" in r ? JSON.stringify(r["isError"]) : "absent (false)"} ` +
    `structuredContent ${"structuredContent" in r ? JSON.stringify(redactRemote(r["structuredContent"])) : "missing"}`
}

const receivedText = (exchange: Exchange): string => {
  const response = exchange.response
  if (response === undefined) {
    return exchange.error === undefined ? "no answer" : `no answer: ${exchange.error.message}`
  }
  const head = `${response.status} ${mediaType(response)}`
  const encoding = response.headers["content-encoding"]
  const encoded = encoding === undefined || encoding === "identity" ? "" : ` (content-encoding ${encoding})`
  if (exchange.purpose === "oauth_token") return `${head}${encoded} (token answer not shown)`
  if (response.status < 200 || response.status > 299) return `${head}${encoded} (body not shown)`
  if (response.body.length === 0) return `${head}${encoded} (empty body)`
  const text = decoder.decode(response.body)
  if (mediaType(response) === "text/event-stream") {
    const frames = text.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim())
    const shown = frames.map((frame) => {
      try {
        return jsonRpcText(JSON.parse(frame))
      } catch {
        return `<${frame.length} bytes, not JSON>`
      }
    })
    return clip(`${head}${encoded} ${shown.length} data frame(s): ${shown.join(" | ")}`)
  }
  try {
    return clip(`${head}${encoded} ${jsonRpcText(JSON.parse(text))}`)
  } catch {
    return `${head}${encoded} <${response.body.length} bytes, not JSON>`
  }
}

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

// An MCP request reads as its tool call: the envelope (_meta, jsonrpc) is the same on every request.
const mcpCall = (body: unknown): string | undefined => {
  if (body === null || typeof body !== "object" || !("params" in body) || !("id" in body)) return undefined
  const params = body.params
  if (params === null || typeof params !== "object" || !("name" in params) || !("arguments" in params)) return undefined
  return `tools/call ${String(params.name)} id=${String(body.id)} arguments ${JSON.stringify(params.arguments)}`
}

const sentText = (exchange: Exchange): string => {
  if (exchange.purpose === "oauth_token") return `POST ${exchange.url} (client credentials grant; credentials not shown)`
  const mcp = exchange.requestHeaders["mcp-name"]
  const headers = mcp === undefined ? "" : ` [Mcp-Name: ${mcp}]`
  const credential = exchange.withoutCredential ? " (no Authorization header)" : ""
  const body = mcp === undefined ? exchange.requestBody : (mcpCall(parsed(exchange.requestBody)) ?? exchange.requestBody)
  return clip(`POST ${exchange.url}${headers}${credential} ${body}`)
}

/** An exchange as report evidence. */
export const evidence = (exchange: Exchange): Conformance.Evidence => ({
  sent: sentText(exchange),
  received: receivedText(exchange),
  duration_ms: Math.round(exchange.durationMs * 10) / 10
})

/** What the exchange was for, in the latency summary: the REST path or the MCP tool. */
export const label = (exchange: Exchange): string =>
  exchange.requestHeaders["mcp-name"] ?? (URL.parse(exchange.url)?.pathname ?? exchange.url)
