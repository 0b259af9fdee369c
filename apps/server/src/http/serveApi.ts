/**
 * Serves one `HttpApi` on its own Node HTTP server: our Error-object
 * middleware, its own router (built fresh, so two APIs in one process never
 * share routes), and a graceful stop: on release the server stops accepting,
 * closes idle keep-alive connections, lets in-flight requests finish (up to
 * `graceMillis`, then closes what is left) — all before the database closes.
 */
import { Etag, HttpApiBuilder, type HttpApi, type HttpApp, HttpRouter, HttpServer } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeHttpPlatform from "@effect/platform-node/NodeHttpPlatform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodePath from "@effect/platform-node/NodePath"
import { ErrorResponses } from "@crm-relay/events"
import type * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { type Context, Effect, Layer, Metric, Runtime } from "effect"
import * as ConnectionLimits from "./ConnectionLimits.js"
import * as ClientAddress from "./public/ClientAddress.js"
import * as RefusalLog from "./RefusalLog.js"
import * as HttpConnections from "./HttpConnections.js"
import { accessLog } from "./accessLog.js"

/** Where an API listens. */
export interface Address {
  /** Base URL for clients on this machine (a wildcard bind is reached via loopback). */
  readonly url: string
  readonly host: string
  readonly port: number
}

const urlHost = (hostname: string): string => {
  if (hostname === "0.0.0.0" || hostname === "") return "127.0.0.1"
  if (hostname === "::") return "[::1]"
  return hostname.includes(":") ? `[${hostname}]` : hostname
}

/**
 * What a router needs besides its server (file answers, ETags, the file
 * system and paths), for every listener at once: the caller builds it once
 * for all of them. `NodeHttpServer.layer` would build it, with Node's whole
 * context, once per listener: an eighth of the Effect operations of the
 * server's start.
 */
export const platform: Layer.Layer<HttpRouter.HttpRouter.DefaultServices> = Layer.mergeAll(
  NodeHttpPlatform.layer,
  Etag.layerWeak,
  NodeFileSystem.layer,
  NodePath.layer
)

/** Serves `api` on `host:port` and provides its address under `tag`; `platform` provides what its router needs. */
export const serveApi = <I, RApi, EApi, RRoutes = never, ERoutes = never, RShortcut = never>(options: {
  readonly api: Layer.Layer<HttpApi.Api, EApi, RApi>
  /** The API's name in access lines and metrics (`public`, `internal`), and who its requests act as until authenticated. */
  readonly observe: { readonly api: string; readonly actor: string }
  /** Wraps the whole app (every answer passes through it), e.g. to add headers. */
  readonly wrap?: (app: HttpApp.Default) => HttpApp.Default
  /** Routes beside the API's on its router (e.g. GET /metrics). */
  readonly routes?: Layer.Layer<never, ERoutes, RRoutes>
  readonly host: string | undefined
  readonly port: number
  readonly messages: ErrorResponses.Messages
  readonly tag: Context.Tag<I, Address>
  readonly graceMillis?: number
  /** Timeouts and connection budget of a listener facing the internet; Node's defaults when not given. */
  readonly connectionLimits?: { readonly limits: ConnectionLimits.ConnectionLimits; readonly listener: ConnectionLimits.Listener } | undefined
  /** Proxies whose X-Forwarded-For names the client address (see ClientAddress). */
  readonly trustedProxies?: ReadonlyArray<AddressPolicy.Cidr> | undefined
  /** The answer to a body over the cap on routes that answer refused input in their own shape (see HttpConnections). */
  readonly tooLarge?: HttpConnections.TooLarge | undefined
  /** Answers some requests before any router, logging its refusals through the access log's throttle. */
  readonly shortcut?: ((refusals: RefusalLog.RefusalLog) => Effect.Effect<HttpConnections.Shortcut, never, RShortcut>) | undefined
}): Layer.Layer<
  I,
  EApi | ERoutes | import("@effect/platform/HttpServerError").ServeError,
  RApi | RRoutes | RShortcut | HttpRouter.HttpRouter.DefaultServices
> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const refusals = RefusalLog.make()
      const shortcut = options.shortcut === undefined ? undefined : yield* options.shortcut(refusals)
      const guard = options.connectionLimits
      const limits = guard?.limits
      const server = new HttpConnections.Server({
        ...HttpConnections.serverOptions,
        ...(limits === undefined ? {} : ConnectionLimits.serverOptions(limits))
      })
      const inOrder = HttpConnections.install(server, options.messages.notFound, {
        shortcut,
        tooLarge: options.tooLarge,
        onTimeout: guard === undefined
          ? undefined
          : (phase) => void Runtime.runFork(runtime)(Metric.increment(guard.listener.timedOut[phase]))
      })
      if (guard !== undefined) ConnectionLimits.install(server, guard.limits, guard.listener, runtime)
      const clientAddress = ClientAddress.middleware(options.trustedProxies ?? [])
      const graceMillis = options.graceMillis ?? 10_000

      const gracefulStop = Layer.scopedDiscard(
        Effect.addFinalizer(() =>
          Effect.async<void>((resume) => {
            if (!server.listening) return resume(Effect.void)
            const force = setTimeout(() => server.closeAllConnections(), graceMillis)
            // A keep-alive connection becomes idle when its request finishes: close it then.
            const sweep = setInterval(() => server.closeIdleConnections(), 50)
            server.close(() => {
              clearTimeout(force)
              clearInterval(sweep)
              resume(Effect.void)
            })
            server.closeIdleConnections()
          })
        )
      )

      const address = Layer.effect(
        options.tag,
        Effect.map(HttpServer.HttpServer, ({ address }) => {
          if (address._tag !== "TcpAddress") return { url: "", host: "", port: 0 }
          return { url: `http://${urlHost(address.hostname)}:${address.port}`, host: address.hostname, port: address.port }
        })
      )

      const wrap = options.wrap ?? ((app: HttpApp.Default) => app)
      const serve = HttpApiBuilder.serve((app) => clientAddress(accessLog(options.observe.api, options.observe.actor, refusals)(inOrder(wrap(app))))).pipe(
        // A path parameter of any length reaches its handler (which answers an unknown id 404 after the key).
        Layer.locally(HttpRouter.currentRouterConfig, { maxParamLength: Number.MAX_SAFE_INTEGER }),
        Layer.provide(options.routes ?? Layer.empty),
        Layer.provide(options.api),
        Layer.provide(ErrorResponses.layer(options.messages))
      )

      return Layer.merge(gracefulStop, address).pipe(
        // Built after `serve`, so released before it: the stop drains while handlers are still attached.
        Layer.provide(serve),
        Layer.provide(NodeHttpServer.layerServer(() => server, options.host === undefined ? { port: options.port } : { port: options.port, host: options.host })),
        Layer.fresh
      )
    })
  )
