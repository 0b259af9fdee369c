/**
 * Everything the Integrations area's browser tests run against, on loopback
 * with ports chosen by the system: a crm-relay server (public, internal and
 * portal listeners, workers) over a test database; the reference bridge
 * (real TLS, `bridge.localhost`); an HTTPS webhook receiver
 * (`hooks.localhost`) that verifies each delivery's signature; the server's
 * egress trusting both certificates and allowed to reach 127.0.0.1 only
 * (broker addresses too, as EGRESS_ALLOW_PRIVATE would: a test's own
 * RabbitMQ and NATS listen there).
 */
import { BrokerEgress, DnsResolver, Egress } from "@crm-relay/bridge"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import * as TestTenants from "@crm-relay/reference-bridge/TestTenants"
import { BridgeLayers, Server } from "@crm-relay/server"
import { TestDatabase, Vault } from "@crm-relay/store"
import { Certificate } from "@crm-relay/testing"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import * as Path from "node:path"
import * as Receiver from "./Receiver.js"

export const BRIDGE_HOST = "bridge.localhost"
export const RECEIVER_HOST = "hooks.localhost"
export const ADMIN_TOKEN = "portal-test-admin-token-0123456789"
export const { OTHER, TENANT } = TestTenants

/** The built page (Nx builds it before this project's tests). */
export const ASSETS = Path.join(import.meta.dirname, "..", "..", "dist")

/** The webhook receiver of the stack. */
export class TestReceiver extends Context.Tag("@crm-relay/portal/test/TestReceiver")<TestReceiver, Receiver.Receiver>() {}

/** One test CA for the bridge and the receiver: the egress trusts exactly it. */
class TestTls extends Context.Tag("@crm-relay/portal/test/TestTls")<TestTls, Certificate.TlsMaterial>() {}

const TlsLive = Layer.effect(TestTls, Certificate.generateTlsMaterial({ dnsNames: [BRIDGE_HOST, RECEIVER_HOST], ips: ["127.0.0.1"] }))

const ReceiverLive = Layer.scoped(TestReceiver, Effect.flatMap(TestTls, (tls) => Receiver.make(tls, RECEIVER_HOST)))

/** The reference bridge serving the shared test tenants (t-1: API key and OAuth client; t-2: API key). */
const BridgeLive = Layer.unwrapEffect(
  Effect.map(TestTls, (tls) =>
    ReferenceBridge.layer({
      urlHost: BRIDGE_HOST,
      tls,
      tenants: [
        {
          tenantId: TENANT.tenantId,
          apiKey: TENANT.apiKey,
          oauth: { clientId: TENANT.clientId, clientSecret: TENANT.clientSecret, expiresIn: 3600 }
        },
        { tenantId: OTHER.tenantId, apiKey: OTHER.apiKey }
      ]
    }))
)

/** Egress toward the loopback bridge, receiver and brokers only, on the live clock. */
const bridgeSide = (cas: ReadonlyArray<string>) =>
  BridgeLayers.layerWith(
    Layer.scopedContext(
      Effect.withClock(
        Layer.build(
          Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: cas }).pipe(
            Layer.provide(DnsResolver.layerStatic({ [BRIDGE_HOST]: ["127.0.0.1"], [RECEIVER_HOST]: ["127.0.0.1"] }))
          )
        ),
        Clock.make()
      )
    ),
    // Plain AMQP and NATS toward loopback only: the rule TLS-by-default leaves to EGRESS_ALLOW_PRIVATE.
    BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(Layer.provide(DnsResolver.layerStatic({})))
  )

const ServerLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const tls = yield* TestTls
    return Server.layerWithDatabase({
      role: "all",
      port: 0,
      publicHost: "127.0.0.1",
      adminHost: "127.0.0.1",
      adminPort: 0,
      adminToken: Redacted.make(ADMIN_TOKEN),
      dataDir: Option.none(),
      bridge: bridgeSide([tls.ca]),
      masterKeys: Vault.randomMasterKeys(),
      portal: { host: "127.0.0.1", port: 0, publicUrl: Option.none(), assetsDir: Option.some(ASSETS) }
    })
  })
)

/** The whole stack. */
export const Live = ServerLive.pipe(
  Layer.provideMerge(TestDatabase.layer),
  Layer.provideMerge(Layer.merge(BridgeLive, ReceiverLive)),
  Layer.provideMerge(TlsLive)
)

/** The listeners' base URLs. */
export const urls = Effect.map(Server.Listening, (l) => ({
  admin: l.internalApi.url,
  portal: Option.getOrThrow(l.portal).url,
  public: Option.getOrThrow(l.publicApi).url
}))

/** One internal API call with the admin token; answers status and JSON. */
export const admin = (method: string, path: string, body?: unknown) =>
  Effect.flatMap(urls, ({ admin }) =>
    Effect.promise(async () => {
      const response = await fetch(`${admin}${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      const text = await response.text()
      return { status: response.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) }
    }))

/** A new account of `mode` and a fresh single-use link to its Integrations area. */
export const accountWithLink = (mode: "live" | "demo" | "sandbox" = "live", name = "Acme Plumbing") =>
  Effect.gen(function*() {
    const created = yield* admin("POST", "/v1/accounts", { name, mode })
    const id = (created.json as { id: string }).id
    const link = yield* admin("POST", `/v1/accounts/${id}/portal-sessions`)
    return { id, url: (link.json as { url: string }).url }
  })
