/**
 * Generated requests against the public port (methods, paths, queries,
 * headers, content types, bodies of every JSON type and depth, malformed
 * HTTP, pipelining): every answer has a contract status and the Error object,
 * the oracle for the three pairs holds, and the server answers normally
 * afterwards. A failure prints its seed: rerun it with
 * `npm run fuzz:event-api -- --seed N` or `EVENT_API_FUZZ_SEED=N` here.
 */
import { describe, expect, it } from "@effect/vitest"
import { EventApiFuzz } from "@crm-relay/testing"
import { TestDatabase } from "@crm-relay/store"
import { Effect, Layer } from "effect"
import { randomInt } from "node:crypto"
import { defaultEdge } from "../src/http/Server.js"
import { accountWithKey, layerServer, urls } from "./support/TestServer.js"

const REQUESTS = 2_000
const seed = Number(process.env["EVENT_API_FUZZ_SEED"] ?? randomInt(2 ** 31))

// Every generated request comes from one loopback address: the failed-key limit (tested in
// PublicEdge.test.ts) would answer 429 after 30 invalid keys; this run checks the answers' shapes.
const FuzzServerLive = layerServer({ edge: { ...defaultEdge, failedKeyLimit: 1_000_000 } }).pipe(Layer.provideMerge(TestDatabase.layer))

describe("Event API, generated requests", () => {
  it.layer(FuzzServerLive, { timeout: 120_000 })((it) => {
    it.effect(`"No other public paths or methods are served", "Bodies are the Error object": ${REQUESTS} generated requests (seed ${seed})`, () =>
      Effect.gen(function*() {
        const port = Number(new URL((yield* urls).public).port)
        const keys = yield* Effect.forEach(
          Array.from({ length: EventApiFuzz.KeyRing.needed(REQUESTS) }),
          () => Effect.map(accountWithKey(), (a) => a.key),
          { concurrency: 4 }
        )
        const report = yield* Effect.promise(() => EventApiFuzz.run({ port, seed, requests: REQUESTS, keys: keys.slice(1), concurrency: 8 }))
        const after = yield* Effect.promise(() => EventApiFuzz.stillServes(port, keys[0]!))
        const violations = [...report.violations, ...after]
        expect(violations.slice(0, 20), `seed ${seed}: ${violations.length} violations; counts ${JSON.stringify(report.counts)}`).toEqual([])
        expect(report.requests).toBeGreaterThanOrEqual(REQUESTS)
        // Every kind of answer was tried.
        for (const status of ["200", "201", "204", "400", "401", "404", "413", "429"]) expect(report.counts[status] ?? 0).toBeGreaterThan(0)
      }), { timeout: 180_000 })
  })
})
