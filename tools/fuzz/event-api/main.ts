/**
 * Generated requests against the public Event API port of a server started
 * here (in-memory PGlite, or a fresh schema of DATABASE_URL dropped at the
 * end): methods, paths, queries, headers, content types, bodies of every JSON
 * type and depth, malformed HTTP and pipelining, each answer checked against
 * the contract (status, Error object, the oracle for the three pairs).
 *
 *   npm run fuzz:event-api -- [--requests 20000] [--seed N] [--concurrency 8]
 *
 * Prints the seed, the counts per status and any violation; exits non-zero
 * on a violation. The same seed sends the same requests.
 */
import { Accounts, IntegrationKeys } from "@crm-relay/events"
import * as Server from "@crm-relay/server/http/Server"
import { TestDatabase } from "@crm-relay/store"
import { EventApiFuzz } from "@crm-relay/testing"
import { Console, Context, Effect, Layer, Option, Redacted } from "effect"
import { randomInt } from "node:crypto"
import * as Argv from "../../bench/support/Argv.js"
import { runMain } from "../../bench/support/runMain.js"

const requests = Argv.integer("requests", 20_000)
const seed = Argv.integer("seed", randomInt(2 ** 31), 0)
const concurrency = Argv.integer("concurrency", 8)

const server = Server.layerWithDatabase({
  role: "api",
  port: 0,
  publicHost: "127.0.0.1",
  adminHost: "127.0.0.1",
  adminPort: 0,
  adminToken: Redacted.make(`fuzz-${randomInt(2 ** 31)}-admin-token`),
  dataDir: Option.none()
}).pipe(Layer.provideMerge(TestDatabase.layer))

const main = Effect.gen(function*() {
  yield* Console.log(`seed ${seed}, ${requests} requests, ${concurrency} connections at a time`)
  const context = yield* Layer.build(server)
  const listening = Context.get(context, Server.Listening)
  const port = Number(new URL(Option.getOrThrow(listening.publicApi).url).port)
  const accounts = Context.get(context, Accounts.Accounts)
  const integrationKeys = Context.get(context, IntegrationKeys.IntegrationKeys)
  const keys = yield* Effect.forEach(
    Array.from({ length: EventApiFuzz.KeyRing.needed(requests) + 1 }),
    () =>
      Effect.flatMap(accounts.create({ name: "fuzz", mode: "live" }), (account) =>
        Effect.map(integrationKeys.create(account.id), (created) => Redacted.value(created.key))),
    { concurrency: 8 }
  )
  const started = Date.now()
  const report = yield* Effect.promise(() => EventApiFuzz.run({ port, seed, requests, keys: keys.slice(1), concurrency }))
  const after = yield* Effect.promise(() => EventApiFuzz.stillServes(port, keys[0]!))
  const seconds = (Date.now() - started) / 1000
  const violations = [...report.violations, ...after]
  const counts = Object.entries(report.counts).sort(([a], [b]) => a.localeCompare(b))
  yield* Console.log(`${report.requests} requests in ${seconds.toFixed(1)} s`)
  for (const [status, count] of counts) yield* Console.log(`  ${status.padEnd(6)} ${count}`)
  yield* Console.log(`server still answers normally: ${after.length === 0 ? "yes" : "no"}`)
  if (violations.length > 0) {
    for (const violation of violations.slice(0, 50)) yield* Console.error(violation)
    return yield* Effect.fail(new Error(`seed ${seed}: ${violations.length} violations`))
  }
  yield* Console.log(`seed ${seed}: no violations`)
})

runMain(main)
