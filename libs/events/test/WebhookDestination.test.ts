/**
 * The HTTPS webhook kind through the shared destination kit: real HTTPS
 * receivers on loopback, the real safe egress (127.0.0.1 allowed, as
 * EGRESS_ALLOW_PRIVATE would; the test CA trusted).
 */
import { DnsResolver, Egress } from "@crm-relay/bridge"
import { Certificate } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Scope } from "effect"
import type { Target } from "../src/Destination.js"
import { DestinationKinds } from "../src/DestinationKinds.js"
import * as WebhookDestination from "../src/WebhookDestination.js"
import { type Arrived, DestinationFixture, suite } from "./support/DestinationKit.js"
import * as Gate from "./support/Gate.js"
import * as Receiver from "./support/Receiver.js"

const webhook = (url: string): Target => ({ config: { url }, credentials: Option.none() })

/** Fresh paths of one receiver for each test of the kit; `scope` is the suite's (its gates live as long). */
const fixtureOf = (receiver: Receiver.Receiver, scope: Scope.Scope) => {
  let tests = 0
  const pathOf = (target: Target) => new URL(String((target.config as { readonly url: string }).url)).pathname
  return Layer.succeed(DestinationFixture, {
    targets: Effect.gen(function*() {
      const base = `/kit-${++tests}`
      const at = (path: string) => webhook(receiver.url(`${base}${path}`, "receiver.localhost"))
      receiver.script(`${base}/transient`, [{ status: 503 }])
      receiver.script(`${base}/silent`, [{ status: 200, delayMs: 600_000 }])
      receiver.script(`${base}/flaky`, [{ status: 503 }])
      receiver.script(`${base}/outage`, [{ status: 204 }])
      // The receiver through a gate: an origin (its port) of its own, which the test can take off the network.
      const gate = yield* Scope.extend(Gate.start, scope)
      yield* gate.open(receiver.port)
      return {
        accepting: at("/accepting"),
        transient: at("/transient"),
        // Plain http: egress refuses it before connecting.
        permanent: webhook(`http://receiver.localhost:${receiver.port}${base}/permanent`),
        silent: at("/silent"),
        flaky: { target: at("/flaky"), heal: Effect.sync(() => receiver.script(`${base}/flaky`, [{ status: 204 }])) },
        outage: {
          target: webhook(`https://receiver.localhost:${gate.port}${base}/outage`),
          down: gate.close,
          up: gate.open(receiver.port)
        },
        arrived: (target: Target) =>
          Effect.sync(() =>
            receiver.received(pathOf(target)).map((r): Arrived => ({
              id: r.headers["webhook-id"] ?? "",
              headers: r.headers,
              body: r.body
            }))
          )
      }
    })
  })
}

/** The webhook kind over a real egress that trusts the receiver's CA, and its fixture. */
const KindLayer = Layer.unwrapScoped(
  Effect.gen(function*() {
    const tls = yield* Effect.orDie(Certificate.generateTlsMaterial({ dnsNames: ["receiver.localhost"], ips: ["127.0.0.1"] }))
    const receiver = yield* Receiver.make(tls, "127.0.0.1")
    // A deadline no loaded machine reaches: the silent receiver must still be waited on when the test looks.
    const egress = Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: tls.ca, deadline: Duration.minutes(2) }).pipe(
      Layer.provide(DnsResolver.layerStatic({ "receiver.localhost": ["127.0.0.1"] }))
    )
    return Layer.merge(WebhookDestination.layer.pipe(Layer.provide(egress)), fixtureOf(receiver, yield* Effect.scope))
  })
)

suite(WebhookDestination.KIND, KindLayer)

describe("WebhookDestination", () => {
  it.effect("REST hooks stay HTTPS: check refuses a URL of another scheme, with credentials or a fragment, with one sentence", () =>
    Effect.gen(function*() {
      const refusals = yield* Effect.forEach(
        ["http://receiver.example/hook", "https://user:pw@receiver.example/hook", "https://receiver.example/hook#x", "not a url"],
        (url) => Effect.flip(WebhookDestination.checkUrl(url))
      )
      expect(refusals.map((r) => r.message)).toEqual([
        "The webhook URL must start with https://.",
        "The webhook URL must not carry credentials.",
        "The webhook URL must not carry a fragment.",
        "The webhook URL is not a URL."
      ])
      yield* WebhookDestination.checkUrl("https://receiver.example/hook?token=abc")
    }))

  it.effect("DestinationKinds: a kind is found by name; an unknown kind is refused with a sentence naming the known ones", () =>
    Effect.gen(function*() {
      const kinds = yield* DestinationKinds
      expect(kinds.kinds()).toEqual(["webhook"])
      expect((yield* kinds.get("webhook")).kind).toBe("webhook")
      const unknown = yield* Effect.flip(kinds.get("carrier-pigeon"))
      expect(unknown).toMatchObject({ reason: "unknown_kind", message: "The destination kind must be one of \"webhook\"." })
    }).pipe(Effect.provide(DestinationKinds.layerOf(WebhookDestination.registered).pipe(Layer.provide(Egress.layerWith().pipe(Layer.provide(DnsResolver.layerStatic({}))))))))

  it.effect("DestinationKinds: two Layers claiming one kind name are a defect at build, not a silent replacement (the same Layer twice is built once)", () =>
    Effect.gen(function*() {
      const egress = Egress.layerWith().pipe(Layer.provide(DnsResolver.layerStatic({})))
      const same = DestinationKinds.layerOf(WebhookDestination.registered, WebhookDestination.registered).pipe(Layer.provide(egress))
      expect((yield* Effect.provide(DestinationKinds, same)).kinds()).toEqual(["webhook"])
      const twice = DestinationKinds.layerOf(
        DestinationKinds.register(WebhookDestination.layer),
        DestinationKinds.register(WebhookDestination.layer)
      ).pipe(
        Layer.provide(Egress.layerWith().pipe(Layer.provide(DnsResolver.layerStatic({}))))
      )
      const exit = yield* Effect.exit(Effect.provide(DestinationKinds, twice))
      expect(exit._tag).toBe("Failure")
    }))
})
