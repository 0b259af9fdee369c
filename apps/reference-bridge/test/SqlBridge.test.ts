/**
 * The bridge on the SQL store (PGlite, or PostgreSQL at DATABASE_URL):
 * atomic booking and replay after a lost response hold end to end.
 */
import { TestDatabase } from "@crm-relay/store"
import { expect, layer } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Faults from "../src/Faults.js"
import * as ReferenceBridge from "../src/ReferenceBridge.js"
import * as SqlStore from "../src/SqlStore.js"
import { call } from "./support/bridgeClient.js"
import { appointment, bodies, TENANTS } from "./support/fixtures.js"
import * as H from "./support/https.js"
import { TLS } from "./support/startBridge.js"

/** One database for the file (PGlite starts in seconds); each test starts its own bridge on it, emptied. */
const storeLayer = SqlStore.layer().pipe(Layer.provide(TestDatabase.layer), Layer.orDie)

const sqlBridge = Effect.gen(function*() {
  const bridge = yield* ReferenceBridge.makeWith({ tenants: TENANTS, tls: TLS })
  yield* bridge.control.reset
  const agent = yield* Effect.acquireRelease(Effect.sync(() => H.agent(bridge.ca)), (a) => Effect.sync(() => a.destroy()))
  return { bridge, agent }
})

layer(storeLayer, { excludeTestServices: true })("bridge on the SQL store", (it) => {
  it.scoped("Operation rule 5: ten concurrent bookings of one slot over HTTPS: one receipt, nine 409", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* sqlBridge
      const { id } = (yield* call("rest", bridge, agent, "contacts.upsert", bodies.upsert())).receipt as { id: string }
      const answers = yield* Effect.all(
        Array.from({ length: 10 }, (_, i) =>
          call(i % 2 === 0 ? "rest" : "mcp", bridge, agent, "appointments.create", bodies.appointment(appointment(id)))),
        { concurrency: "unbounded" }
      )
      expect(answers.map((a) => a.status).sort()).toEqual([200, ...Array(9).fill(409)])
      expect((yield* bridge.control.records).appointments).toHaveLength(1)
    }))

  it.scoped("Errors rule 2: a lost response after commit is replayed from the SQL mapping", () =>
    Effect.gen(function*() {
      const { agent, bridge } = yield* sqlBridge
      yield* bridge.control.setFault(Faults.lostResponse(), { operation: "contacts.upsert" })
      const body = bodies.upsert()
      expect(Either.isLeft(yield* Effect.either(call("mcp", bridge, agent, "contacts.upsert", body)))).toBe(true)
      const replay = yield* call("rest", bridge, agent, "contacts.upsert", body)
      const records = yield* bridge.control.records
      expect(replay.receipt).toEqual({ id: records.contacts[0]!.id, is_new: true })
      expect(records.contacts).toHaveLength(1)
      expect(records.idempotency.map((k) => k.idempotencyKey)).toEqual([body.idempotency_key])
    }))
})
