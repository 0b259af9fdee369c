/**
 * `crm-relay serve`: the database (migrated before anything listens), the
 * Event API services, the internal API on ADMIN_HOST:ADMIN_PORT, the public
 * Event API on PORT and the Integrations area on PORTAL_HOST:PORTAL_PORT
 * (ROLE all|api), and the worker fibers (ROLE all|worker).
 * Released in reverse: workers stop, the APIs drain in-flight requests, then
 * the database closes.
 */
import { Etag, FileSystem, HttpPlatform, type HttpRouter, Path } from "@effect/platform"
import { Accounts, EventApiLive, FailedKeys, IntegrationKeys, KeyTags, Preview, RateLimiter, Subscriptions } from "@crm-relay/events"
import { Database, JobHandoffs, Migrations, type Vault } from "@crm-relay/store"
import { type ConfigError, Context, Duration, Effect, Layer, Option, type Redacted } from "effect"
import { type Address, AdminAddress, PortalAddress, PublicAddress } from "./Addresses.js"
import * as AdminToken from "../config/AdminToken.js"
import * as BridgeLayers from "../workers/BridgeLayers.js"
import * as ConnectionLimits from "./ConnectionLimits.js"
import * as CallPipeline from "../workers/CallPipeline.js"
import * as PublicEdge from "../config/PublicEdge.js"
import * as RefusedAddresses from "./public/RefusedAddresses.js"
import * as PerformList from "./public/PerformList.js"
import type * as HttpConnections from "./HttpConnections.js"
import * as ConnectionsLayers from "../workers/ConnectionsLayers.js"
import * as DeliveryWorker from "../workers/DeliveryWorker.js"
import * as InCallApiLive from "./internal/InCallApiLive.js"
import * as InternalApiLive from "./internal/InternalApiLive.js"
import * as OutcomePath from "./internal/OutcomePath.js"
import * as PortalApiLive from "./portal/PortalApiLive.js"
import * as PortalLinks from "./portal/PortalLinks.js"
import { PortalSessions } from "./portal/PortalSessions.js"
import * as PortalSite from "./portal/PortalSite.js"
import * as MasterKey from "../config/MasterKey.js"
import * as Metrics from "../observability/Metrics.js"
import * as Reference from "./internal/Reference.js"
import * as ServeApi from "./serveApi.js"
import { Readiness } from "./Readiness.js"
import * as ServerFile from "../config/ServerFile.js"
import * as TraceSampling from "../observability/TraceSampling.js"
import type { LifecycleSettings, Role, Settings } from "../config/Settings.js"
import * as LifecycleWorkers from "../workers/LifecycleWorkers.js"
import * as Workers from "../workers/Workers.js"

/** Where this server listens: the public API only when its role serves it. */
export class Listening extends Context.Tag("@crm-relay/server/Listening")<
  Listening,
  { readonly publicApi: Option.Option<Address>; readonly internalApi: Address; readonly portal: Option.Option<Address> }
>() {}

/** `ServicesLive` with the integration keys' tag secret sealed in the Vault under `keys` (see KeyTags). */
export const servicesWith = (keys: Vault.MasterKeys) => ServicesLive.pipe(Layer.provide(KeyTags.layerWith(keys)))

/** The Event API's services over a `SqlClient` (and the keys' tags: `servicesWith`). */
export const ServicesLive = Layer.mergeAll(
  Accounts.Accounts.Default,
  IntegrationKeys.IntegrationKeys.Default,
  Subscriptions.Subscriptions.Default,
  RateLimiter.RateLimiter.Default,
  Preview.Preview.Default
)

/** `layer` with the bound on an account's subscriptions, when one is given (every `Subscriptions` inside reads it). */
const withSubscriptionLimit = <A, E, R>(layer: Layer.Layer<A, E, R>, limit: number | undefined) =>
  limit === undefined ? layer : layer.pipe(Layer.provide(Layer.succeed(Subscriptions.SubscriptionLimit, limit)))

/** How to serve, once the database is chosen. */
export interface ServeOptions {
  readonly role: Role
  readonly port: number
  /** Interface of the public API; all interfaces when undefined. */
  readonly publicHost?: string | undefined
  readonly adminHost: string
  readonly adminPort: number
  readonly adminToken: Redacted.Redacted<string>
  /** Where to publish `server.json` for the CLI; none in tests that share a process. */
  readonly dataDir: Option.Option<string>
  /** The bridge side (egress, clients); from the environment when not given (tests pass their own). */
  readonly bridge?: Layer.Layer<BridgeLayers.Services, ConfigError.ConfigError> | undefined
  /** The master keys of the Vault; when not given, one random key shared by this process's servers (tests). */
  readonly masterKeys?: Vault.MasterKeys | undefined
  /** Retention and auto-disable; the defaults when not given. */
  readonly lifecycle?: LifecycleSettings | undefined
  /** The Integrations area's listener (ROLE all|api); none when not given (tests of other parts). */
  readonly portal?: {
    readonly host: string
    readonly port: number
    /** PORTAL_PUBLIC_URL: where links point; https makes the cookie Secure. */
    readonly publicUrl: Option.Option<string>
    /** Where the built page is; found beside the build or in the repository when not given. */
    readonly assetsDir?: Option.Option<string> | undefined
  } | undefined
  /** The public port's timeouts, budget, failed-key limit and trusted proxies (and the portal's budget); `defaultEdge` when not given. */
  readonly edge?: PublicEdge.PublicEdge | undefined
  /** MAX_SUBSCRIPTIONS_PER_ACCOUNT; `Subscriptions.SubscriptionLimit`'s default when not given. */
  readonly maxSubscriptionsPerAccount?: number | undefined
}

/** The settings' defaults, with no connection budget (tests; `serve` derives one from the open-file limit). */
export const defaultEdge: PublicEdge.PublicEdge = {
  limits: { headTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000, maxConnections: Number.POSITIVE_INFINITY },
  failedKeyLimit: 30,
  failedKeyHoldMs: 5_000,
  portalMaxConnections: Number.POSITIVE_INFINITY,
  trustedProxies: []
}

/** The services the public Event API's handlers use, and its router's. */
type EventApiServices =
  | IntegrationKeys.IntegrationKeys
  | FailedKeys.FailedKeys
  | Subscriptions.Subscriptions
  | Preview.Preview
  | HttpRouter.HttpRouter.DefaultServices

/**
 * Builds `layer` over the Event API's services alone. Every request fiber
 * starts from the context its server was built in and copies (and compares)
 * it at each provide: the whole server's dozens of services would make every
 * public request pay for them.
 */
const onlyEventApiServices = <A, E>(layer: Layer.Layer<A, E, EventApiServices>): Layer.Layer<A, E, EventApiServices> =>
  Layer.scopedContext(
    Effect.flatMap(Effect.scope, (scope) =>
      Layer.buildWithScope(layer, scope).pipe(
        Effect.mapInputContext(Context.pick(
          IntegrationKeys.IntegrationKeys,
          FailedKeys.FailedKeys,
          Subscriptions.Subscriptions,
          Preview.Preview,
          HttpPlatform.HttpPlatform,
          Etag.Generator,
          FileSystem.FileSystem,
          Path.Path
        ))
      ))
  )

/** What the worker fibers need. */
type WorkerServices =
  | Effect.Effect.Context<typeof CallPipeline.pushWorker.run>
  | Effect.Effect.Context<typeof DeliveryWorker.deliveryWorker.run>
  | Effect.Effect.Context<typeof LifecycleWorkers.recoveryWorker.run>

/** The server over a database provided by the caller (tests share one between instances). */
export const layerWithDatabase = (options: ServeOptions) => {
  const edge = options.edge ?? defaultEdge
  const masterKeys = options.masterKeys ?? MasterKey.processLocal
  const internalMessages = { notFound: InternalApiLive.messages.notFound, refusedInput: InCallApiLive.refusedInput }
  const internalApi = ServeApi.serveApi({
    api: InternalApiLive.layer(options.adminToken),
    host: options.adminHost,
    port: options.adminPort,
    messages: internalMessages,
    observe: { api: "internal", actor: "admin_token" },
    routes: Layer.merge(Metrics.route(options.adminToken), Reference.routes),
    tag: AdminAddress,
    // The in-call routes answer a body over the cap as any refused input, in the shape the voice agent acts on.
    tooLarge: InCallApiLive.rejection,
    // The outcome POST, one per call, before the router when plain.
    shortcut: OutcomePath.shortcut({ adminToken: InternalApiLive.tokenCheck(options.adminToken), messages: internalMessages })
  })
  const publicApi = Workers.servesPublicApi(options.role)
    ? onlyEventApiServices(ServeApi.serveApi({
      api: EventApiLive.layer,
      host: options.publicHost,
      port: options.port,
      messages: EventApiLive.errorPolicy,
      observe: { api: "public", actor: "anonymous" },
      tag: PublicAddress,
      connectionLimits: { limits: edge.limits, listener: ConnectionLimits.publicPort },
      trustedProxies: edge.trustedProxies,
      // Refused addresses first (no query at all), then the plain GET /perform-list.
      shortcut: (refusals) =>
        Effect.map(
          Effect.all([
            RefusedAddresses.shortcut({ trusted: edge.trustedProxies, holdMs: edge.failedKeyHoldMs })(refusals),
            PerformList.shortcut({ trusted: edge.trustedProxies })(refusals)
          ]),
          ([refused, performList]): HttpConnections.Shortcut => (request, response, queued) =>
            refused(request, response) || performList(request, response, queued)
        )
    })).pipe(Layer.provide(FailedKeys.layerWithPolicy({ limit: edge.failedKeyLimit, window: Duration.minutes(1) })))
    : Layer.empty
  const portalOptions = options.portal
  const portal = portalOptions !== undefined && Workers.servesPublicApi(options.role)
    ? ServeApi.serveApi({
      api: PortalApiLive.layer,
      host: portalOptions.host,
      port: portalOptions.port,
      messages: { notFound: PortalApiLive.messages.notFound },
      observe: { api: "portal", actor: "anonymous" },
      routes: PortalSite.routes({
        assetsDir: portalOptions.assetsDir ?? PortalSite.findAssets(),
        secureCookie: Option.exists(portalOptions.publicUrl, (url) => url.startsWith("https://"))
      }).pipe(Layer.provide(PortalSessions.Default)),
      wrap: PortalSite.withSecurityHeaders,
      tag: PortalAddress,
      // It faces browsers: the public port's deadlines, and a budget of its own.
      connectionLimits: { limits: { ...edge.limits, maxConnections: edge.portalMaxConnections }, listener: ConnectionLimits.portal }
    })
    : Layer.empty
  // Links point at PORTAL_PUBLIC_URL, or at the listener once it is up.
  const portalAndLinks = PortalLinks.layer(Option.flatMap(Option.fromNullable(portalOptions), (p) => p.publicUrl)).pipe(
    Layer.provideMerge(portal)
  )

  const listening = Layer.scoped(
    Listening,
    Effect.gen(function*() {
      const internal = yield* AdminAddress
      const pub = yield* Effect.serviceOption(PublicAddress)
      const portalAddress = yield* Effect.serviceOption(PortalAddress)
      const links = yield* PortalLinks.PortalLinks
      const database = yield* Database.DatabaseInfo
      const readiness = yield* Readiness
      if (Option.isSome(options.dataDir)) {
        yield* ServerFile.publish(options.dataDir.value, {
          pid: process.pid,
          adminUrl: internal.url,
          publicUrl: Option.getOrElse(Option.map(pub, (a) => a.url), () => ""),
          ...Option.match(links.baseUrl, { onNone: () => ({}), onSome: (portalUrl) => ({ portalUrl }) }),
          startedAt: new Date().toISOString()
        })
      }
      yield* Effect.logInfo("crm-relay is serving").pipe(
        Effect.annotateLogs({
          role: options.role,
          database: database.kind,
          database_location: database.location,
          public_api: Option.getOrElse(Option.map(pub, (a) => a.url), () => "off"),
          portal: Option.getOrElse(Option.map(portalAddress, (a) => a.url), () => "off"),
          internal_api: internal.url
        })
      )
      // Every listener of the role is up (this Layer is built after them): /readyz may say 200.
      yield* readiness.serving
      yield* Effect.addFinalizer(() => Effect.zipRight(readiness.stopping, Effect.logInfo("crm-relay is stopping: draining requests")))
      return { publicApi: pub, internalApi: internal, portal: portalAddress }
    })
  )

  const lifecycle = options.lifecycle ?? LifecycleWorkers.defaults
  const workers = [
    CallPipeline.pushWorker,
    DeliveryWorker.fanoutWorker,
    DeliveryWorker.deliveryWorkerWith({
      autoDisable: LifecycleWorkers.autoDisablePolicy(lifecycle),
      probes: LifecycleWorkers.probePolicy(lifecycle)
    }),
    LifecycleWorkers.recoveryWorker,
    LifecycleWorkers.retentionWorker(LifecycleWorkers.retentionPolicy(lifecycle))
  ]
  return Layer.mergeAll(listening, Workers.layer<WorkerServices>(options.role, workers)).pipe(
    Layer.provide(Layer.merge(internalApi, publicApi)),
    Layer.provideMerge(portalAndLinks),
    Layer.provideMerge(CallPipeline.ServicesLive),
    Layer.provideMerge(ConnectionsLayers.layer(masterKeys)),
    Layer.provideMerge(options.bridge ?? BridgeLayers.Live),
    // One for the intake and the delivery runner: with ROLE all, the runner takes an outcome's deliveries from it.
    Layer.provideMerge(Layer.mergeAll(servicesWith(masterKeys), Migrations.layer, JobHandoffs.JobHandoffs.Default, Readiness.Default, ServeApi.platform)),
    (server) => withSubscriptionLimit(server, options.maxSubscriptionsPerAccount)
  )
}

/** The whole server from its settings. */
export const layer = (settings: Settings, overrides: { readonly publicHost?: string } = {}) => {
  // Opened and checked first: a database a newer release migrated is refused before any file is written.
  const database = Migrations.guard(
    Database.layer({
      url: settings.databaseUrl,
      sessionUrl: settings.databaseSessionUrl,
      dataDir: settings.dataDir,
      poolSize: settings.databasePoolSize
    })
  )
  return Layer.unwrapEffect(
    Effect.map(Effect.all([
      Effect.zipRight(AdminToken.requireForHost(settings.adminToken, settings.adminHost), AdminToken.resolve(settings.adminToken, settings.dataDir)),
      MasterKey.resolve(settings),
      PublicEdge.resolve(settings.publicEdge)
    ]), ([adminToken, masterKeys, edge]) =>
      layerWithDatabase({
        role: settings.role,
        port: settings.port,
        publicHost: overrides.publicHost,
        adminHost: settings.adminHost,
        adminPort: settings.adminPort,
        adminToken,
        portal: settings.portal,
        dataDir: Option.some(settings.dataDir),
        masterKeys,
        edge,
        lifecycle: settings.lifecycle,
        maxSubscriptionsPerAccount: settings.maxSubscriptionsPerAccount
      })
    )
  ).pipe(
    Layer.provideMerge(database),
    // Set before anything is built, so every fiber of the server (requests, workers) samples.
    Layer.provide(TraceSampling.layer(TraceSampling.recordedShare(settings.tracing)))
  )
}
