/**
 * The bridge's one HTTP app: it routes a request to the REST transport, the
 * MCP endpoint, the token endpoint or the control endpoint, and around the
 * first three it enforces the 1 MiB request limit, records the request,
 * consumes the fault that matches it and applies the fault's wire part
 * (status, redirect, delay, lost response, body rewrites).
 */
import { Operations } from "@crm-relay/contract"
import type { HttpApp } from "@effect/platform"
import { HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpRouter } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Cause, Duration, Effect, Option } from "effect"
import { FaultBook } from "./FaultBook.js"
import type { Fault, FaultOperation, Route, Transport } from "./Faults.js"
import { TOKEN_OPERATION } from "./Faults.js"
import { authorizationScheme } from "./internal/bearer.js"
import { nowIso } from "./internal/ids.js"
import type { RequestState } from "./internal/requestContext.js"
import { currentRequest } from "./internal/requestContext.js"
import { ONE_MIB, rewrite } from "./internal/wireFaults.js"
import { Recorder } from "./Recorder.js"

/** Where each endpoint is served. */
export interface BridgePaths {
  /** Base path of the REST operations (`{bridge_base_url}` = origin + this). */
  readonly rest: string
  readonly mcp: string
  readonly token: string
  /** Base path of the control endpoint, when it is enabled. */
  readonly control: string | undefined
}

type App = Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  unknown,
  HttpServerRequest.HttpServerRequest | HttpRouter.HttpRouter.DefaultServices
>

/** The apps the front routes to. */
export interface BridgeEndpoints {
  readonly rest: HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>
  readonly mcp: App
  readonly token: App
  readonly control: App | undefined
}

const OPERATION_BY_PATH = new Map<string, Operations.OperationName>(
  Operations.OPERATIONS.map((op) => [Operations.REST_PATHS[op], op])
)

const DEFAULT_OVERSIZE = ONE_MIB + 64 * 1024

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The operation of an MCP request: from the Mcp-Name header, else from the body's tool name. */
const mcpOperation = (headers: Record<string, string>, body: unknown): Operations.OperationName | undefined => {
  const params = isObject(body) && isObject(body["params"]) ? body["params"] : undefined
  const name = headers["mcp-name"] ?? (typeof params?.["name"] === "string" ? params["name"] : undefined)
  return Operations.OPERATIONS.find((op) => Operations.TOOL_NAMES[op] === name)
}

/** The body as recorded: JSON when it parses, form fields for the token endpoint (secret hidden), else text. */
const recordedBody = (transport: Transport, text: string): unknown => {
  if (transport === "oauth") {
    const form = Object.fromEntries(new URLSearchParams(text))
    return "client_secret" in form ? { ...form, client_secret: "<redacted>" } : form
  }
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const errorJson = (status: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ error: message }, { status, headers })

/** The answer of a status fault: a short JSON error, with Retry-After and WWW-Authenticate where they belong. */
const statusAnswer = (fault: Extract<Fault, { _tag: "Status" }>, transport: Transport) => {
  const headers: Record<string, string> = {}
  if (fault.retryAfter !== undefined) headers["retry-after"] = String(fault.retryAfter)
  if (fault.status === 401) {
    headers["www-authenticate"] = transport === "oauth" ? "Basic realm=\"reference-bridge\"" : "Bearer realm=\"svc.crm.v1\""
  }
  return errorJson(fault.status, `Injected ${fault.status}.`, headers)
}

/** Builds the front app over the endpoints. */
export const make = (paths: BridgePaths, endpoints: BridgeEndpoints) =>
  Effect.gen(function*() {
    const faults = yield* FaultBook
    const recorder = yield* Recorder

    /** Runs an endpoint, turning any failure into its HTTP answer (404, 500, …). */
    const answer = (app: App) =>
      app.pipe(
        Effect.catchAllCause((cause) =>
          Effect.flatMap(HttpServerError.causeResponse(cause), ([response, rest]) =>
            response.status >= 500 && !Cause.isInterruptedOnly(rest)
              ? Effect.as(Effect.logError("reference bridge request failed", rest), response)
              : Effect.succeed(response))
        )
      )

    /** Applies a fault's wire part around an endpoint. `lost` means: destroy the socket instead of answering. */
    const withFault = (fault: Option.Option<Fault>, transport: Transport, app: App) =>
      Effect.gen(function*() {
        if (Option.isNone(fault)) return { response: yield* answer(app), lost: false }
        const f = fault.value
        switch (f._tag) {
          case "Status":
            if (f.afterCommit === true) yield* answer(app)
            return { response: statusAnswer(f, transport), lost: false }
          case "Redirect":
            return { response: HttpServerResponse.redirect(f.location, { status: f.status ?? 302 }), lost: false }
          case "Delay":
            yield* Effect.sleep(Duration.millis(f.millis))
            return { response: yield* answer(app), lost: false }
          case "LostResponse":
            return { response: yield* answer(app), lost: true }
          case "Oversize":
          case "Gzip":
          case "MalformedJson":
          case "EmptyBody":
            return { response: rewrite(yield* answer(app), f._tag, f._tag === "Oversize" ? f.bytes ?? DEFAULT_OVERSIZE : 0), lost: false }
          default:
            // Receipt and MCP faults are applied by the transport itself.
            return { response: yield* answer(app), lost: false }
        }
      })

    /** Records, consumes a fault and serves one request on a bridge transport or the token endpoint. */
    const serveRecorded = (request: HttpServerRequest.HttpServerRequest, transport: Transport, path: string, app: App) =>
      Effect.gen(function*() {
        const seq = yield* recorder.nextSeq
        const at = yield* nowIso
        const headers = request.headers
        const declared = Number(headers["content-length"] ?? "0")
        const text = declared > ONE_MIB ? "" : yield* Effect.orElseSucceed(request.text, () => "")
        const body = recordedBody(transport, text)
        const operation: FaultOperation | undefined = transport === "rest"
          ? OPERATION_BY_PATH.get(path.slice(paths.rest.length))
          : transport === "mcp"
          ? mcpOperation(headers, body)
          : TOKEN_OPERATION
        const route: Route = { transport, operation }
        const tooLarge = declared > ONE_MIB || Buffer.byteLength(text) > ONE_MIB
        const fault = tooLarge ? Option.none() : yield* faults.consume(route)
        const state: RequestState = { route, fault, principal: undefined }
        const record = (status: number | "lost" | "interrupted") =>
          recorder.add({
            seq,
            at,
            transport,
            operation,
            method: request.method,
            path,
            headers: Object.fromEntries(Object.entries(headers).filter(([name]) => name !== "authorization")),
            authorizationScheme: authorizationScheme(headers["authorization"]),
            idempotencyKey: headers["idempotency-key"],
            body,
            principal: state.principal,
            tenantId: state.principal?.tenantId,
            status,
            fault: Option.getOrUndefined(fault)
          })
        const outcome = tooLarge
          ? { response: errorJson(413, "The request body exceeds 1 MiB."), lost: false }
          : yield* withFault(fault, transport, app).pipe(
            Effect.locally(currentRequest, state),
            Effect.onInterrupt(() => record("interrupted"))
          )
        let response = outcome.response
        if (response.status === 401 && transport !== "oauth" && response.headers["www-authenticate"] === undefined) {
          response = HttpServerResponse.setHeader(response, "www-authenticate", "Bearer realm=\"svc.crm.v1\"")
        }
        yield* record(outcome.lost ? "lost" : response.status)
        if (outcome.lost) {
          // Errors rule 2: the write is committed, the answer never arrives.
          NodeHttpServerRequest.toIncomingMessage(request).socket.destroy()
        }
        return response
      })

    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const path = new URL(request.url, "http://bridge.invalid").pathname
      if (endpoints.control !== undefined && paths.control !== undefined && path.startsWith(`${paths.control}/`)) {
        return yield* answer(endpoints.control)
      }
      if (path === paths.mcp) return yield* serveRecorded(request, "mcp", path, endpoints.mcp)
      if (path === paths.token) return yield* serveRecorded(request, "oauth", path, endpoints.token)
      if (path.startsWith(`${paths.rest}/`)) return yield* serveRecorded(request, "rest", path, endpoints.rest)
      return errorJson(404, "Not found.")
    })
  })
