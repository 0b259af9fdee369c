import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { Accounts } from "../src/Accounts.js"
import { IntegrationKeys } from "../src/IntegrationKeys.js"
import { Subscriptions } from "../src/Subscriptions.js"
import { ServicesLive } from "./support/Services.js"

const accountWithKey = Effect.gen(function*() {
  const account = yield* (yield* Accounts).create({ name: "Acme", mode: "live" })
  const key = yield* (yield* IntegrationKeys).create(account.id)
  return { accountId: account.id, keyId: key.id }
})

describe("Subscriptions", () => {
  it.layer(ServicesLive)((it) => {
    it.effect("Subscription lifecycle: subscribe gives a UUID; not idempotent, a repeat creates a second subscription", () =>
      Effect.gen(function*() {
        const subscriptions = yield* Subscriptions
        const owner = yield* accountWithKey
        const input = { ...owner, targetUrl: "https://hooks.example.com/a", event: "lead" }
        const first = yield* subscriptions.create(input)
        const second = yield* subscriptions.create(input)
        expect(Schema.is(Schema.UUID)(first)).toBe(true)
        expect(second).not.toBe(first)
        expect((yield* subscriptions.list(owner.accountId)).map((s) => s.id)).toEqual([first, second])
      }))

    it.effect("targetUrl and event are stored exactly as given (reachability is not checked)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const owner = yield* accountWithKey
        const targetUrl = "ftp://10.0.0.1/not http at all?x=1#y"
        const id = yield* (yield* Subscriptions).create({ ...owner, targetUrl, event: "Booking " })
        const rows = yield* sql`SELECT target_url, event FROM subscriptions WHERE id = ${id}`
        expect(rows).toEqual([{ target_url: targetUrl, event: "Booking " }])
      }))

    it.effect("Events rule 3: an unknown event value is accepted but matches no delivery fan-out", () =>
      Effect.gen(function*() {
        const subscriptions = yield* Subscriptions
        const owner = yield* accountWithKey
        const lead = yield* subscriptions.create({ ...owner, targetUrl: "https://r/lead", event: "lead" })
        const booking = yield* subscriptions.create({ ...owner, targetUrl: "https://r/booking", event: "booking" })
        const all = yield* subscriptions.create({ ...owner, targetUrl: "https://r/all", event: "all" })
        yield* subscriptions.create({ ...owner, targetUrl: "https://r/unknown", event: "leads" })
        expect((yield* subscriptions.matching(owner.accountId, "lead")).map((s) => s.id)).toEqual([lead, all])
        expect((yield* subscriptions.matching(owner.accountId, "booking")).map((s) => s.id)).toEqual([booking, all])
      }))

    it.effect("fan-out targets come back oldest first even when created in the same instant (one transaction, one now())", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const subscriptions = yield* Subscriptions
        const owner = yield* accountWithKey
        const created = yield* sql.withTransaction(Effect.forEach(
          Array.from({ length: 12 }, (_, i) => `https://r/${i}`),
          (targetUrl) => subscriptions.create({ ...owner, targetUrl, event: "all" })
        ))
        expect((yield* subscriptions.matching(owner.accountId, "lead")).map((s) => s.id)).toEqual(created)
        expect((yield* subscriptions.list(owner.accountId)).map((s) => s.id)).toEqual(created)
      }))

    it.effect("Subscription lifecycle: removal by the owner succeeds once; removed, unknown, malformed or another account's id is not found", () =>
      Effect.gen(function*() {
        const subscriptions = yield* Subscriptions
        const owner = yield* accountWithKey
        const stranger = yield* accountWithKey
        const id = yield* subscriptions.create({ ...owner, targetUrl: "https://r", event: "lead" })
        expect(yield* subscriptions.remove(stranger.accountId, id)).toBe(false)
        expect(yield* subscriptions.remove(owner.accountId, id)).toBe(true)
        expect(yield* subscriptions.remove(owner.accountId, id)).toBe(false)
        expect(yield* subscriptions.remove(owner.accountId, "00000000-0000-4000-8000-000000000000")).toBe(false)
        expect(yield* subscriptions.remove(owner.accountId, "not-a-uuid")).toBe(false)
        expect(yield* subscriptions.matching(owner.accountId, "lead")).toEqual([])
      }))

    it.effect("Subscription lifecycle: turning a key off leaves the account's subscriptions in place", () =>
      Effect.gen(function*() {
        const subscriptions = yield* Subscriptions
        const owner = yield* accountWithKey
        const id = yield* subscriptions.create({ ...owner, targetUrl: "https://r", event: "all" })
        yield* (yield* IntegrationKeys).disable(owner.keyId)
        expect((yield* subscriptions.matching(owner.accountId, "booking")).map((s) => s.id)).toEqual([id])
      }))
  })
})
