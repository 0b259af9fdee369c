/**
 * What the two broker publisher test files share: the egress that lets test
 * names reach loopback, a signed-looking delivery, the retry loop a
 * transient outcome gets from the delivery schedule, and a burst across a
 * broker restart.
 */
import { BrokerEgress, DnsResolver } from "@crm-relay/bridge"
import { Eventually } from "@crm-relay/testing"
import { Deferred, Effect, Layer } from "effect"
import type { BrokerMessage, PublishOutcome } from "../../src/internal/brokers/BrokerMessage.js"

/** BrokerEgress allowing loopback: test names resolve to 127.0.0.1; any other name is NXDOMAIN. */
export const loopbackEgress = BrokerEgress.layerWith(["127.0.0.1/32"]).pipe(
  Layer.provide(DnsResolver.layerStatic({ "broker.localhost": ["127.0.0.1"], "other.localhost": ["127.0.0.1"] }))
)

let sequence = 0
/** A lead delivery with a fresh id and the Standard Webhooks headers. */
export const message = (label = "lead"): BrokerMessage => {
  const id = `msg_${Date.now().toString(36)}${(sequence++).toString(36).padStart(4, "0")}`
  return {
    body: new TextEncoder().encode(JSON.stringify({ type: "lead.created", data: { label, id } })),
    messageId: id,
    headers: {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": `v1,${Buffer.from(id).toString("base64")}`,
      "content-type": "application/json"
    }
  }
}

/** The outcome's reason ("" when delivered). */
export const reason = (outcome: PublishOutcome) => (outcome._tag === "Delivered" ? "" : outcome.reason)

/** Retries a transient outcome as the delivery schedule would (here without waiting long); permanent ends it. */
export const publishUntilSettled = (
  publisher: { readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome> },
  payload: BrokerMessage
) =>
  Effect.gen(function*() {
    for (let attempt = 1;; attempt++) {
      const outcome = yield* publisher.publish(payload)
      if (outcome._tag !== "Transient") return { outcome, attempt }
      yield* Eventually.pause(50)
    }
  })

/**
 * Publishes `burst`, 8 at a time, across a restart of `broker`: the restart begins once 50 are
 * delivered, with the first half's rest still in flight, and the second half waits until the broker
 * is down, so some publishes meet it stopped however fast the machine finishes the first half.
 */
export const publishAcrossRestart = <E>(
  publisher: { readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome> },
  broker: { readonly stop: Effect.Effect<void>; readonly start: Effect.Effect<void, E> },
  burst: ReadonlyArray<BrokerMessage>
) =>
  Effect.gen(function*() {
    const down = yield* Deferred.make<void>()
    const delivered = { count: 0 }
    const half = Math.floor(burst.length / 2)
    const restart = Effect.gen(function*() {
      yield* Eventually.eventually(Effect.sync(() => delivered.count >= Math.min(50, half)))
      yield* broker.stop
      yield* Deferred.succeed(down, undefined)
      yield* broker.start
    })
    const publishAll = Effect.forEach(burst, (payload, index) =>
      (index < half ? Effect.void : Deferred.await(down)).pipe(
        Effect.zipRight(publishUntilSettled(publisher, payload)),
        Effect.tap(() => Effect.sync(() => delivered.count++))
      ), { concurrency: 8 })
    const [results] = yield* Effect.all([publishAll, restart], { concurrency: 2 })
    return results
  })
