/**
 * A contract-faithful svc.crm.v1 bridge (REST and MCP, API key and OAuth
 * client credentials) on loopback HTTPS, for tests, the demo and as an
 * example for customers who build their own bridge.
 *
 * ```ts
 * const bridge = yield* ReferenceBridge.make({
 *   tenants: [{ tenantId: "t-1", apiKey: "key-1", oauth: { clientId: "c-1", clientSecret: "s-1", expiresIn: 120 } }]
 * })
 * // bridge.restBaseUrl, bridge.mcpUrl, bridge.tokenUrl, bridge.ca
 * yield* bridge.control.setFault(Faults.status(503, { retryAfter: 1 }), { operation: "leads.create", times: 2 })
 * ```
 */
import { Operations } from "@crm-relay/contract"
import { Certificate } from "@crm-relay/testing"
import type { HttpApiEndpoint } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Data, Effect, Either, Layer, Redacted, Schema } from "effect"
import type { Scope } from "effect"
import * as https from "node:https"
import * as BridgeControl from "./BridgeControl.js"
import * as BridgeHttpApp from "./BridgeHttpApp.js"
import * as BridgeOperations from "./BridgeOperations.js"
import { BridgeStore } from "./BridgeStore.js"
import * as Calendar from "./Calendar.js"
import * as ControlApi from "./ControlApi.js"
import * as Credentials from "./Credentials.js"
import * as FaultBook from "./FaultBook.js"
import type { FaultRule } from "./Faults.js"
import * as McpTransport from "./McpTransport.js"
import * as MemoryStore from "./MemoryStore.js"
import * as Recorder from "./Recorder.js"
import * as RestTransport from "./RestTransport.js"
import * as TokenEndpoint from "./TokenEndpoint.js"

/** Names the generated server certificate is valid for. */
export interface TlsNames {
  readonly dnsNames: ReadonlyArray<string>
  readonly ips: ReadonlyArray<string>
}

/** How to start a bridge. Only `tenants` is required. */
export interface ReferenceBridgeOptions {
  /** Tenants and the credentials bound to each (API key and/or OAuth clients). */
  readonly tenants: ReadonlyArray<Credentials.TenantOptions>
  /** Operations advertised by capabilities and served; default all six. Must satisfy Operation rule 1. */
  readonly operations?: ReadonlyArray<Operations.OperationName>
  /** `booking_closes_availability` in capabilities; default true. */
  readonly bookingClosesAvailability?: boolean
  /** The bookable calendar; default Mon–Fri 09:00–17:00 in the request's zone, 60-minute slots, capacity 1. */
  readonly calendar?: Calendar.CalendarOptions
  /** Listen address; default `127.0.0.1`. */
  readonly host?: string
  /** Listen port; default 0 (any free port). */
  readonly port?: number
  /** Host name written into the URLs (e.g. `bridge.test` a test resolver maps to 127.0.0.1); default `host`. */
  readonly urlHost?: string
  /**
   * TLS: names for a generated certificate (default `localhost`,
   * `bridge.localhost`, 127.0.0.1, ::1), or ready material.
   */
  readonly tls?: TlsNames | Certificate.TlsMaterial
  /** Paths of the endpoints; defaults `/crm`, `/mcp`, `/oauth/token`, `/control`. */
  readonly paths?: {
    readonly rest?: string
    readonly mcp?: string
    readonly token?: string
    readonly control?: string
  }
  /** Fault rules in force from the start. */
  readonly faults?: ReadonlyArray<FaultRule>
  /** Enables the HTTP control endpoint, protected by this Bearer token. */
  readonly controlToken?: string | Redacted.Redacted
}

/** A running bridge. */
export interface ReferenceBridgeHandle {
  /** The address it listens on. */
  readonly host: string
  readonly port: number
  /** `https://{urlHost}:{port}` */
  readonly origin: string
  /** `{bridge_base_url}` of the REST transport, e.g. `https://127.0.0.1:43123/crm`. */
  readonly restBaseUrl: string
  /** `{mcp_url}` of the MCP transport, e.g. `https://127.0.0.1:43123/mcp`. */
  readonly mcpUrl: string
  /** The OAuth token URL `{auth_url}`, e.g. `https://127.0.0.1:43123/oauth/token`. */
  readonly tokenUrl: string
  /** Base URL of the HTTP control endpoint, when `controlToken` was given. */
  readonly controlUrl: string | undefined
  /** PEM of the CA that signed the server certificate: trust it to connect. */
  readonly ca: string
  /** Faults, received requests, stored records, grants, reset. */
  readonly control: BridgeControl.BridgeControl
}

/** The bridge could not start: the options are invalid, or the certificate or the listener failed. */
export class ReferenceBridgeError extends Data.TaggedError("ReferenceBridgeError")<{
  readonly reason: "InvalidOptions" | "Certificate" | "Listen"
  readonly message: string
  readonly cause?: unknown
}> {}

/** A running bridge as a service, for `it.layer`. */
export class ReferenceBridge extends Context.Tag("@crm-relay/reference-bridge/ReferenceBridge")<
  ReferenceBridge,
  ReferenceBridgeHandle
>() {}

const invalid = (message: string) => new ReferenceBridgeError({ reason: "InvalidOptions", message })

const decodeCapabilities = Schema.decodeUnknownEither(Operations.CapabilitiesResponse)

const isPathSegment = (value: string): value is HttpApiEndpoint.PathSegment =>
  value.startsWith("/") && value.length > 1 && !value.endsWith("/") && !/[?#\s]/.test(value)

const path = (
  name: string,
  value: string | undefined,
  fallback: HttpApiEndpoint.PathSegment
): Effect.Effect<HttpApiEndpoint.PathSegment, ReferenceBridgeError> => {
  const chosen = value ?? fallback
  return isPathSegment(chosen)
    ? Effect.succeed(chosen)
    : Effect.fail(invalid(`paths.${name} must start with "/", have no trailing "/", query or fragment`))
}

/** Starts a bridge on the `BridgeStore` in context (memory or SQL); it stops when the scope closes. */
export const makeWith = (
  options: ReferenceBridgeOptions
): Effect.Effect<ReferenceBridgeHandle, ReferenceBridgeError, Scope.Scope | BridgeStore> =>
  Effect.gen(function*() {
    const paths = {
      rest: yield* path("rest", options.paths?.rest, "/crm"),
      mcp: yield* path("mcp", options.paths?.mcp, "/mcp"),
      token: yield* path("token", options.paths?.token, "/oauth/token"),
      control: yield* path("control", options.paths?.control, "/control")
    }
    const all = [paths.rest, paths.mcp, paths.token, paths.control]
    if (all.some((a, i) => all.some((b, j) => i !== j && (a === b || b.startsWith(`${a}/`))))) {
      return yield* invalid("paths must be distinct and must not contain one another")
    }
    const calendar = yield* Either.match(Calendar.make(options.calendar), {
      onLeft: (message) => Effect.fail(invalid(message)),
      onRight: Effect.succeed
    })
    const operations = options.operations ?? Operations.OPERATIONS
    const bookingClosesAvailability = options.bookingClosesAvailability ?? true
    const capabilities = decodeCapabilities({
      contract_version: "svc.crm.v1",
      operations,
      booking_closes_availability: bookingClosesAvailability
    })
    if (Either.isLeft(capabilities)) {
      return yield* invalid(`operations break Operation rule 1: ${capabilities.left.message}`)
    }

    const tls = options.tls !== undefined && "cert" in options.tls
      ? options.tls
      : yield* Certificate.generateTlsMaterial(options.tls ?? Certificate.LOOPBACK_NAMES).pipe(
        Effect.mapError((cause) => new ReferenceBridgeError({ reason: "Certificate", message: "certificate generation failed", cause }))
      )

    const store = yield* BridgeStore
    const credentials = yield* Credentials.make(options.tenants).pipe(Effect.mapError((e) => invalid(e.message)))
    const context = Context.make(BridgeStore, store).pipe(
      Context.add(Credentials.Credentials, credentials),
      Context.add(FaultBook.FaultBook, yield* FaultBook.make(options.faults ?? [])),
      Context.add(Recorder.Recorder, yield* Recorder.make)
    )
    const withOperations = Context.add(
      context,
      BridgeOperations.BridgeOperations,
      yield* Effect.provide(
        BridgeOperations.make({ operations, bookingClosesAvailability, calendar }),
        context
      )
    )
    const control = yield* Effect.provide(BridgeControl.make, context)
    const controlToken = options.controlToken === undefined
      ? undefined
      : Redacted.isRedacted(options.controlToken)
      ? options.controlToken
      : Redacted.make(options.controlToken)

    const app = yield* BridgeHttpApp.make(
      { ...paths, control: controlToken === undefined ? undefined : paths.control },
      {
        rest: yield* Effect.provide(RestTransport.make(paths.rest), withOperations),
        mcp: yield* Effect.provide(McpTransport.make, withOperations),
        token: yield* Effect.provide(TokenEndpoint.make, context),
        control: controlToken === undefined ? undefined : ControlApi.make(paths.control, controlToken, control)
      }
    ).pipe(Effect.provide(context))

    const host = options.host ?? "127.0.0.1"
    let nodeServer: https.Server | undefined
    const server = yield* NodeHttpServer.make(() => {
      nodeServer = https.createServer({ cert: tls.cert, key: tls.key })
      return nodeServer
    }, { host, port: options.port ?? 0 }).pipe(
      Effect.mapError((cause) => new ReferenceBridgeError({ reason: "Listen", message: `cannot listen on ${host}`, cause }))
    )
    // Runs before the server's own close: idle keep-alive sockets must not hold the shutdown.
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer?.closeAllConnections()))
    yield* server.serve(app).pipe(Effect.provide(NodeHttpServer.layerContext))

    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const urlHost = options.urlHost ?? host
    const origin = `https://${urlHost.includes(":") ? `[${urlHost}]` : urlHost}:${port}`
    const handle: ReferenceBridgeHandle = {
      host,
      port,
      origin,
      restBaseUrl: `${origin}${paths.rest}`,
      mcpUrl: `${origin}${paths.mcp}`,
      tokenUrl: `${origin}${paths.token}`,
      controlUrl: controlToken === undefined ? undefined : `${origin}${paths.control}`,
      ca: tls.ca,
      control
    }
    yield* Effect.logDebug("reference bridge listening").pipe(
      Effect.annotateLogs({ rest: handle.restBaseUrl, mcp: handle.mcpUrl, token: handle.tokenUrl })
    )
    return handle
  })

/** Starts a bridge with an in-memory store; it stops when the scope closes. */
export const make = (options: ReferenceBridgeOptions): Effect.Effect<ReferenceBridgeHandle, ReferenceBridgeError, Scope.Scope> =>
  Effect.flatMap(MemoryStore.make, (store) => Effect.provideService(makeWith(options), BridgeStore, store))

/** A running bridge (in-memory store) as a Layer. */
export const layer = (options: ReferenceBridgeOptions): Layer.Layer<ReferenceBridge, ReferenceBridgeError> =>
  Layer.scoped(ReferenceBridge, make(options))

/** A running bridge on the `BridgeStore` in context, as a Layer. */
export const layerWith = (options: ReferenceBridgeOptions): Layer.Layer<ReferenceBridge, ReferenceBridgeError, BridgeStore> =>
  Layer.scoped(ReferenceBridge, makeWith(options))
