/**
 * End-to-end harness of the call pipeline on loopback: the reference bridge
 * (real TLS, `bridge.localhost`), an HTTPS webhook receiver
 * (`hooks.localhost`), and a crm-relay server whose egress (LoopbackEgress)
 * trusts their CA and may reach only 127.0.0.1.
 */
import { CrmPushRetry } from "@crm-relay/calls"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { TestDatabase } from "@crm-relay/store"
import { Certificate, Eventually } from "@crm-relay/testing"
import { Clock, Context, Duration, Effect, Layer, Logger, LogLevel, Option, Schedule, type Scope } from "effect"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import * as Server from "../../src/http/Server.js"
import type { Role } from "../../src/config/Settings.js"
import * as Tracing from "../../src/observability/Tracing.js"
import { BRIDGE_HOST, bridgeSide, RECEIVER_HOST } from "./LoopbackEgress.js"
import { adminRequest, type Answer, layerServer } from "./TestServer.js"

/** Tenants: t-1 and t-2 on the main bridge (all six operations), t-lead on a bridge without appointments.create. */
export const TENANTS = {
  main: { tenantId: "t-1", apiKey: "key-one_visible~ASCII" },
  other: { tenantId: "t-2", apiKey: "key-two" },
  leadOnly: { tenantId: "t-lead", apiKey: "key-lead-only" }
} as const

/** The operations of the lead-only bridge. */
export const LEAD_ONLY_OPERATIONS = ["capabilities", "contacts.search", "contacts.upsert", "leads.create"] as const

/** One request the receiver got. */
export interface Delivered {
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** When it arrived (epoch milliseconds). */
  readonly at: number
}

/** A local HTTPS webhook receiver. */
export interface Receiver {
  readonly url: (path: string) => string
  readonly ca: string
  readonly received: () => ReadonlyArray<Delivered>
}

/**
 * One CA and one certificate for every loopback server of a test (bridges and
 * receiver): two throwaway CAs share a subject name, and a trust store holding
 * both may pick the wrong one.
 */
export const loopbackTls = Effect.orDie(
  Certificate.generateTlsMaterial({ dnsNames: [BRIDGE_HOST, RECEIVER_HOST, "localhost"], ips: ["127.0.0.1"] })
)

/** Starts the receiver for the scope with `tls`, reached as `host`; it answers 200 `{}` to every POST. */
export const receiver = (
  tls: Certificate.TlsMaterial,
  host: string = RECEIVER_HOST
): Effect.Effect<Receiver, never, Scope.Scope> => Effect.gen(function*() {
  const log: Array<Delivered> = []
  const server = yield* Effect.acquireRelease(
    Effect.async<Https.Server>((resume) => {
      const s = Https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const headers: Record<string, string> = {}
          for (const [name, value] of Object.entries(req.headers)) {
            if (typeof value === "string") headers[name] = value
          }
          log.push({ path: req.url ?? "", headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() })
          res.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) => Effect.async<void>((resume) => {
      s.closeAllConnections()
      s.close(() => resume(Effect.void))
    })
  )
  const port = (server.address() as AddressInfo).port
  return { url: (path) => `https://${host}:${port}${path}`, ca: tls.ca, received: () => [...log] }
})

/** A short persisted retry schedule for tests: 100 ms apart, at most `retries` retries (Retry-After still honoured). */
export const shortRetry = (retries: number) =>
  Layer.succeed(CrmPushRetry.CrmPushRetry, {
    schedule: Schedule.spaced(Duration.millis(100)).pipe(
      Schedule.intersect(Schedule.recurs(retries)),
      Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "Transient")
    )
  })

/** What a test gets: the bridge, the receiver and the server's URLs. */
export class Pipeline extends Context.Tag("test/Pipeline")<Pipeline, {
  readonly bridge: ReferenceBridge.ReferenceBridgeHandle
  /** A bridge that does not offer appointments.create. */
  readonly leadOnlyBridge: ReferenceBridge.ReferenceBridgeHandle
  readonly receiver: Receiver
  /** The CA of every loopback server. */
  readonly ca: string
  readonly admin: string
  readonly public: string
}>() {}

/**
 * A crm-relay server of `role` over the database of the context, trusting `ca`, with a short retry schedule
 * (errors logged only); `tracing` exports its spans.
 */
export const serverLayer = (role: Role, ca: string, retries = 5, tracing?: Tracing.Options) =>
  layerServer({ role, bridge: bridgeSide([ca]) }).pipe(
    Layer.provide(shortRetry(retries)),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
    Layer.provide(tracing === undefined ? Layer.empty : Tracing.layer(tracing))
  )

/** The whole pipeline over a fresh test database: one server of `role` (all), the retry schedule `retries` long. */
export const layer = (options: { readonly retries?: number; readonly role?: Role; readonly tracing?: Tracing.Options } = {}) =>
  Layer.scoped(
    Pipeline,
    Effect.gen(function*() {
      const tls = yield* loopbackTls
      const bridge = yield* ReferenceBridge.make({
        urlHost: BRIDGE_HOST,
        tls,
        tenants: [TENANTS.main, TENANTS.other].map((t) => ({ tenantId: t.tenantId, apiKey: t.apiKey }))
      }).pipe(Effect.orDie)
      const leadOnlyBridge = yield* ReferenceBridge.make({
        urlHost: BRIDGE_HOST,
        tls,
        operations: LEAD_ONLY_OPERATIONS,
        bookingClosesAvailability: false,
        tenants: [{ tenantId: TENANTS.leadOnly.tenantId, apiKey: TENANTS.leadOnly.apiKey }]
      }).pipe(Effect.orDie)
      const hooks = yield* receiver(tls)
      const server = yield* Layer.build(serverLayer(options.role ?? "all", tls.ca, options.retries, options.tracing)).pipe(Effect.orDie)
      const listening = Context.get(server, Server.Listening)
      return {
        bridge,
        leadOnlyBridge,
        receiver: hooks,
        ca: tls.ca,
        admin: listening.internalApi.url,
        public: Option.getOrThrow(listening.publicApi).url
      }
    })
  ).pipe(Layer.provideMerge(TestDatabase.layer))

/** A JSON call to the internal API. */
export const admin = (method: string, path: string, body?: unknown): Effect.Effect<Answer, never, Pipeline> =>
  Effect.flatMap(Pipeline, (p) => adminRequest(p.admin, method, path, body))

/** Waits until `check` holds (polling every 50 ms, at most `within`: a bound against a hang), on the live clock. */
export const eventually = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  check: (a: A) => boolean,
  within: Duration.DurationInput = Eventually.HANG_BOUND
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(Duration.decode(within))
    while (true) {
      const value = yield* effect
      if (check(value)) return value
      if ((yield* Clock.currentTimeMillis) > deadline) {
        return yield* Effect.dieMessage(`Condition not met within ${Duration.format(Duration.decode(within))}: ${JSON.stringify(value)}`)
      }
      yield* Effect.sleep(Duration.millis(50))
    }
  })
