import { expect, layer } from "@effect/vitest"
import { Eventually, ListenProbe } from "@crm-relay/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Fiber, Stream } from "effect"
import { Notifier } from "../src/Notifier.js"
import * as TestDatabase from "../src/TestDatabase.js"

/** Payloads the tests send only to learn that a listener is live, or has heard everything sent before. */
const PROBE = "probe"
const END = "end"

/**
 * Listens to `channel` and returns once the listener hears it. `collected`
 * then sends a last notification and, once it is heard (notifications reach
 * a listening session in commit order), returns what arrived in between.
 */
const listener = (channel: string) =>
  Effect.gen(function*() {
    const notifier = yield* Notifier
    const probe = ListenProbe.make()
    const payloads: Array<string> = []
    const fiber = yield* probe.tap(notifier.listen(channel)).pipe(
      Stream.runForEach((payload) => Effect.sync(() => payloads.push(payload))),
      Effect.fork
    )
    yield* probe.hears(notifier.notify(channel, PROBE))
    const from = payloads.length
    return {
      collected: Effect.gen(function*() {
        yield* probe.hears(notifier.notify(channel, END))
        yield* Fiber.interrupt(fiber)
        return payloads.slice(from).filter((payload) => payload !== PROBE && payload !== END)
      })
    }
  })

layer(TestDatabase.layer, { excludeTestServices: true })("Notifier", (it) => {
  // First in the file: Node prints a deprecation once per process, so an earlier test could hide it.
  it.effect("listeners of several channels started at once never queue a LISTEN behind another on the shared connection (pg warns: \"Calling client.query() when the client is already executing a query is deprecated\"), and each hears only its own channel", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const warnings: Array<string> = []
      const onWarning = (warning: Error) => warnings.push(warning.message)
      process.on("warning", onWarning)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.off("warning", onWarning)))
      const channels = ["a", "b", "c", "d"].map((c) => `at-once-${c}`)
      const heard = new Map<string, Array<string>>(channels.map((c) => [c, []]))
      const probe = ListenProbe.make()
      for (const channel of channels) {
        yield* probe.tap(notifier.listen(channel)).pipe(
          Stream.runForEach((payload) => Effect.sync(() => heard.get(channel)!.push(payload))),
          Effect.forkScoped
        )
      }
      for (const channel of channels) {
        const before = heard.get(channel)!.length
        yield* probe.hears(notifier.notify(channel, `to-${channel}`))
        // What reached this channel's listener since: its own payloads only.
        expect(new Set(heard.get(channel)!.slice(before))).toEqual(new Set([`to-${channel}`]))
      }
      for (const channel of channels) expect(heard.get(channel)!.every((payload) => payload === `to-${channel}`)).toBe(true)
      expect(warnings.filter((message) => message.includes("already executing a query"))).toEqual([])
    }).pipe(Effect.scoped))

  it.effect("a notification reaches a listener of the same channel, not of another", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const other = yield* listener("other")
      const jobs = yield* listener("jobs")
      yield* notifier.notify("jobs", "job-1")
      expect(yield* jobs.collected).toEqual(["job-1"])
      expect(yield* other.collected).toEqual([])
    }))

  it.effect("notify is transactional: sent on COMMIT, never on ROLLBACK", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const sql = yield* SqlClient.SqlClient
      const tx = yield* listener("tx")
      yield* sql.withTransaction(Effect.zipRight(notifier.notify("tx", "rolled-back"), Effect.fail("no")))
        .pipe(Effect.ignore)
      yield* sql.withTransaction(notifier.notify("tx", "committed"))
      expect(yield* tx.collected).toEqual(["committed"])
    }))

  it.effect("subscribe succeeds only once its LISTEN is in effect: what is sent next is heard", () =>
    Effect.gen(function*() {
      const notifier = yield* Notifier
      const payloads = yield* notifier.subscribe("after-subscribe")
      yield* notifier.notify("after-subscribe", "sent-after-subscribe")
      expect(yield* Stream.runHead(payloads).pipe(Effect.timeout(Eventually.HANG_BOUND))).toEqual(
        expect.objectContaining({ value: "sent-after-subscribe" })
      )
    }).pipe(Effect.scoped))
})
