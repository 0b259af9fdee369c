/**
 * Bridge client overhead: median and p99 latency of `contacts.upsert` through
 * BridgeClient (REST, API key, the real safe egress) versus a raw undici POST
 * of the same bytes, with the same headers, to the same loopback HTTPS bridge.
 *
 *   npx tsx tools/bench/bridge-overhead/main.ts [--bridge reference|minimal] [--iterations N] [--warmup N]
 *
 * `reference` (default) starts apps/reference-bridge in process; `minimal` is
 * a bare node:https server answering a fixed receipt, which shows the client's
 * absolute overhead. Both paths run sequentially over keep-alive connections,
 * after a warm-up, with the same number of iterations, interleaved in blocks
 * so drift (GC, CPU frequency) hits them alike. Egress.send alone is measured
 * too, to show which layer the overhead comes from. The last line is
 * `ratio: X.XX`: the client's median over the raw median (target ≤ 1.15).
 */
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import { performance } from "node:perf_hooks"
import { Console, Context, Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { Agent, request } from "undici"
import { BridgeClient, connectionLayer, DnsResolver, Egress, TokenCache, TransportRegistry } from "@crm-relay/bridge"
import type { ContactInput, EgressRequest } from "@crm-relay/bridge"
import * as Examples from "@crm-relay/contract/Examples"
import { ReferenceBridge } from "@crm-relay/reference-bridge"
import { generateTlsMaterial } from "@crm-relay/testing/Certificate"
import * as Argv from "../support/Argv.js"
import { runMain } from "../support/runMain.js"

const HOST = "bridge.localhost"
const TENANT = "bench-tenant"
const API_KEY = "bench-api-key-0123456789"

/** The contract's own example contact: realistic bytes, no second copy to drift. */
const contact: ContactInput = Examples.contact

/** A bridge under test: where its REST API is and which CA signed it. */
interface Bridge {
  readonly port: number
  readonly restBaseUrl: string
  readonly ca: string
}

/** apps/reference-bridge, in process, in-memory store. */
const referenceBridge: Effect.Effect<Bridge, unknown, Scope.Scope> = Effect.map(
  ReferenceBridge.make({ urlHost: HOST, tenants: [{ tenantId: TENANT, apiKey: API_KEY }] }),
  (bridge) => ({ port: bridge.port, restBaseUrl: bridge.restBaseUrl, ca: bridge.ca })
)

/** A bare node:https server answering a fixed contacts.upsert receipt. */
const minimalBridge: Effect.Effect<Bridge, unknown, Scope.Scope> = Effect.gen(function*() {
  const tls = yield* generateTlsMaterial()
  const receipt = JSON.stringify({ id: "contact-1", is_new: false })
  const server = yield* Effect.acquireRelease(
    Effect.async<https.Server>((resume) => {
      const server = https.createServer({ cert: tls.cert, key: tls.key, keepAliveTimeout: 60_000 }, (req, res) => {
        req.resume()
        req.on("end", () => {
          if (req.headers.authorization !== `Bearer ${API_KEY}`) {
            res.writeHead(401).end()
            return
          }
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(receipt) })
          res.end(receipt)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
  const port = (server.address() as AddressInfo).port
  return { port, restBaseUrl: `https://${HOST}:${port}/crm`, ca: tls.ca }
})

const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN

const summary = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) }
}

const ms = (n: number) => `${n.toFixed(3)} ms`

const timed = <A, E>(effect: Effect.Effect<A, E>, into: Array<number>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    into.push(performance.now() - start)
  })

const program = Effect.gen(function*() {
  const kind = Argv.text("bridge") ?? "reference"
  if (kind !== "reference" && kind !== "minimal") return yield* Effect.fail(new Error("--bridge must be reference or minimal"))
  const iterations = Argv.integer("iterations", 5000)
  const warmup = Argv.integer("warmup", 500)
  const block = 100

  const bridge = yield* (kind === "reference" ? referenceBridge : minimalBridge)

  // The real egress: loopback allowed for the bench, the bench CA trusted, the host pinned to 127.0.0.1.
  const egress = Context.get(
    yield* Layer.build(
      Egress.layerWith({ allowPrivate: ["127.0.0.1/32"], extraCa: bridge.ca }).pipe(
        Layer.provide(DnsResolver.layerStatic({ [HOST]: ["127.0.0.1"] }))
      )
    ),
    Egress
  )
  const clientOver = (service: Egress["Type"]) =>
    Effect.map(
      Layer.build(
        connectionLayer({
          accountId: "bench-account",
          tenantId: TENANT,
          version: 1,
          transport: { kind: "rest", url: bridge.restBaseUrl },
          auth: { type: "api_key", key: Redacted.make(API_KEY) }
        }).pipe(
          Layer.provide(Layer.mergeAll(Layer.succeed(Egress, service), TokenCache.Default, TransportRegistry.Default))
        )
      ),
      (built) => Context.get(built, BridgeClient)
    )

  // One call through a recording egress gives the exact bytes and headers the client sends.
  const sent: Array<EgressRequest> = []
  const recorder = yield* clientOver({ send: (r) => Effect.suspend(() => (sent.push(r), egress.send(r))) })
  yield* recorder.contactsUpsert(contact)
  const first = sent[0]
  if (first === undefined || !(first.body instanceof Uint8Array)) return yield* Effect.dieMessage("no request recorded")
  const headers: Record<string, string> = { "accept-encoding": "identity" }
  for (const [name, value] of Object.entries(first.headers ?? {})) {
    headers[name] = Redacted.isRedacted(value) ? Redacted.value(value) : value
  }
  const body = first.body
  const path = new URL(first.url).pathname

  // The raw path: those bytes and headers over a plain keep-alive undici Agent.
  const agent = new Agent({ connect: { ca: bridge.ca, servername: HOST } })
  yield* Effect.addFinalizer(() => Effect.promise(() => agent.close()))
  const rawUrl = `https://127.0.0.1:${bridge.port}${path}`
  const rawPost = Effect.promise(async () => {
    const response = await request(rawUrl, { method: "POST", headers, body, dispatcher: agent })
    return { status: response.statusCode, text: await response.body.text() }
  }).pipe(
    Effect.flatMap(({ status, text }) =>
      status === 200 ? Effect.sync(() => JSON.parse(text) as unknown) : Effect.dieMessage(`raw POST answered ${status}`)
    )
  )
  const egressPost = egress.send(first)
  const client = yield* clientOver(egress)
  const clientPost = client.contactsUpsert(contact)

  yield* Console.log(
    `bridge-overhead: contacts.upsert against the ${kind} bridge, ${warmup} warm-up + ${iterations} measured iterations per path`
  )
  yield* Console.log(`request: POST ${path}, ${body.byteLength} bytes; node ${process.version}`)

  const discard: Array<number> = []
  for (let i = 0; i < warmup; i++) {
    yield* timed(rawPost, discard)
    yield* timed(egressPost, discard)
    yield* timed(clientPost, discard)
  }

  const raw: Array<number> = []
  const viaEgress: Array<number> = []
  const viaClient: Array<number> = []
  for (let done = 0; done < iterations; done += block) {
    const n = Math.min(block, iterations - done)
    for (let i = 0; i < n; i++) yield* timed(rawPost, raw)
    for (let i = 0; i < n; i++) yield* timed(egressPost, viaEgress)
    for (let i = 0; i < n; i++) yield* timed(clientPost, viaClient)
  }

  const r = summary(raw)
  const e = summary(viaEgress)
  const c = summary(viaClient)
  yield* Console.log(`raw undici POST : median ${ms(r.median)}  p99 ${ms(r.p99)}`)
  yield* Console.log(`Egress.send     : median ${ms(e.median)}  p99 ${ms(e.p99)}  (same bytes; informational)`)
  yield* Console.log(`BridgeClient    : median ${ms(c.median)}  p99 ${ms(c.p99)}`)
  yield* Console.log(`p99 ratio: ${(c.p99 / r.p99).toFixed(2)}`)
  yield* Console.log(`ratio: ${(c.median / r.median).toFixed(2)}`)
})

runMain(program)
