/**
 * The NATS JetStream kind through the shared destination kit, against a
 * real, private `nats-server -js` on loopback (plain NATS: loopback is
 * allowed as EGRESS_ALLOW_PRIVATE would allow it). One stream captures the
 * kit's subjects; each kit test publishes on subjects of its own, and what
 * arrived is read back from the stream by the test's own client.
 */
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { NatsServer, SilentListener } from "@crm-relay/testing"
import { describe, expect, it } from "@effect/vitest"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Duration, Effect, Layer, Logger, LogLevel, Option, Redacted, Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { Target } from "../src/Destination.js"
import * as NatsDestination from "../src/NatsDestination.js"
import { type Arrived, DestinationFixture, suite } from "./support/DestinationKit.js"
import * as Gate from "./support/Gate.js"

const STREAM = "KIT"

const targetOf = (url: string, subject: string, credentials: Record<string, string>, stream?: string): Target => ({
  config: { url, subject, ...(stream === undefined ? {} : { stream }) },
  credentials: Option.some(Redacted.make(JSON.stringify(credentials)))
})

const subjectOf = (target: Target) => (target.config as { readonly subject: string }).subject

/** The server, a stream capturing `kit.>`, and fresh targets for each kit test. */
const fixture = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const server = yield* Effect.orDie(NatsServer.start)
  const silent = yield* SilentListener.start
  const connection = yield* Effect.acquireRelease(
    Effect.promise(() => connect({ servers: `127.0.0.1:${server.port}`, user: server.user, pass: server.password })),
    (connection) => Effect.promise(() => connection.close().catch(() => {}))
  )
  const jsm = yield* Effect.promise(() => jetstreamManager(connection))
  yield* Effect.promise(() => jsm.streams.add({ name: STREAM, subjects: ["kit.>"] }))
  const credentials = { user: server.user, password: server.password }
  let tests = 0
  const targets = Effect.gen(function*() {
    const base = `kit.${++tests}.${randomUUID().slice(0, 8)}`
    // Gates live as long as the suite's server, not the call that made them.
    const gate = yield* Scope.extend(Gate.start, scope)
    const unused = yield* Scope.extend(Gate.start, scope)
    const outage = yield* Scope.extend(Gate.start, scope)
    yield* outage.open(server.port)
    return {
      accepting: targetOf(server.url, `${base}.accepting`, credentials, STREAM),
      // A gate that drops every connection: the server cannot be reached now.
      transient: targetOf(`nats://127.0.0.1:${unused.port}`, `${base}.transient`, credentials),
      // No stream captures this subject: JetStream can never store it.
      permanent: targetOf(server.url, `nostream.${base}`, credentials),
      silent: targetOf(`nats://127.0.0.1:${silent.port}`, `${base}.silent`, credentials),
      flaky: { target: targetOf(`nats://127.0.0.1:${gate.port}`, `${base}.flaky`, credentials), heal: gate.open(server.port) },
      outage: {
        target: targetOf(`nats://127.0.0.1:${outage.port}`, `${base}.outage`, credentials, STREAM),
        down: outage.close,
        up: outage.open(server.port)
      },
      arrived: (target: Target) =>
        Effect.promise(async () => {
          const subject = subjectOf(target)
          if (!subject.startsWith("kit.")) return []
          const info = await jsm.streams.info(STREAM)
          const found: Array<Arrived> = []
          for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
            const stored = await jsm.streams.getMessage(STREAM, { seq })
            if (stored === null || stored.subject !== subject) continue
            const headers: Record<string, string> = {}
            for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature", "content-type"]) {
              headers[name] = stored.header.get(name)
            }
            found.push({ id: stored.header.get("Nats-Msg-Id"), headers, body: stored.string() })
          }
          return found
        })
    }
  })
  return { server, targets }
})

const egress = BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(Layer.provide(DnsResolver.layerStatic({})))

/** The kind (its deadline far beyond any test, so a silent server is still waited on) and its fixture. */
const KindLayer = Layer.unwrapScoped(Effect.map(fixture, ({ targets }) =>
  Layer.merge(
    NatsDestination.layerWith({ timeoutMs: Duration.toMillis(Duration.minutes(2)) }).pipe(Layer.provide(egress)),
    Layer.succeed(DestinationFixture, { targets })
  ))).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.None)))

suite(NatsDestination.KIND, KindLayer)

describe("NatsDestination", () => {
  it.scopedLive("check refuses a wrong password, a subject no stream captures, a stream that does not capture it, and bad credentials, with one sentence each", () =>
    Effect.gen(function*() {
      const server = yield* Effect.orDie(NatsServer.start)
      const connection = yield* Effect.acquireRelease(
        Effect.promise(() => connect({ servers: `127.0.0.1:${server.port}`, user: server.user, pass: server.password })),
        (connection) => Effect.promise(() => connection.close().catch(() => {}))
      )
      const jsm = yield* Effect.promise(() => jetstreamManager(connection))
      yield* Effect.promise(() => jsm.streams.add({ name: "CRM", subjects: ["crm.>"] }))
      const destination = yield* NatsDestination.makeService()
      const good = { user: server.user, password: server.password }
      yield* destination.check(targetOf(server.url, "crm.leads", good, "CRM"))
      const wrong = yield* Effect.flip(destination.check(targetOf(server.url, "crm.leads", { ...good, password: "not-it" })))
      expect(wrong.reason).toBe("auth")
      expect(wrong.message).toMatch(/^The NATS server at 127\.0\.0\.1:\d+ refused the credentials/)
      const nowhere = yield* Effect.flip(destination.check(targetOf(server.url, "other.leads", good)))
      expect(nowhere).toMatchObject({ reason: "missing", message: expect.stringMatching(/^No JetStream stream on .* captures the subject other\.leads\.$/) })
      const otherStream = yield* Effect.flip(destination.check(targetOf(server.url, "crm.leads", good, "LEADS")))
      expect(otherStream.message).toMatch(/^The subject crm\.leads is captured by the stream CRM on .*, not LEADS\.$/)
      const bad = yield* Effect.flip(destination.check(targetOf(server.url, "crm.leads", { username: "x" })))
      expect(bad.message).toBe("The nats destination's credentials must be a user and a password, or a token.")
    }).pipe(Effect.provide(egress)))
})
