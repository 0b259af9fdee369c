/**
 * Loopback servers for the egress tests: an HTTPS server that records what it
 * receives, and a plain TCP listener that only counts connections (a proxy
 * that must never be used, a private host that must never be reached).
 */
import { Certificate } from "@crm-relay/testing"
import { Context, Effect, Layer } from "effect"
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import type { TLSSocket } from "node:tls"
import { DnsResolver, type StaticAnswer } from "../../src/DnsResolver.js"
import { Egress, type EgressOptions } from "../../src/Egress.js"

/** Names the test certificate is issued for (besides 127.0.0.1 and ::1). */
export const CERT_NAMES = ["bridge.test", "receiver.test", "localhost"] as const

/** TLS material for CERT_NAMES, generated once per test file. */
export const material = await Effect.runPromise(
  Certificate.generateTlsMaterial({ dnsNames: CERT_NAMES, ips: ["127.0.0.1", "::1"] })
)

/** What a test server saw of one request. */
export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly servername: string | null
  readonly body: Buffer
}

/** A running loopback server and what it has seen so far. */
export interface TestServer {
  readonly port: number
  readonly requests: Array<RecordedRequest>
  /** TCP connections accepted so far. */
  readonly connections: () => number
  /** TCP connections currently open. */
  readonly openConnections: () => number
}

/** A handler answers after the request body was read. */
export type Handler = (request: RecordedRequest, res: ServerResponse, req: IncomingMessage) => void

const tracked = (server: net.Server) => {
  let accepted = 0
  const open = new Set<net.Socket>()
  server.on("connection", (socket: net.Socket) => {
    accepted += 1
    open.add(socket)
    socket.on("close", () => open.delete(socket))
  })
  return { accepted: () => accepted, open }
}

const listen = (server: net.Server, host: string, port: number) =>
  Effect.async<number, Error>((resume) => {
    server.once("error", (error) => resume(Effect.fail(error)))
    server.listen(port, host, () => resume(Effect.succeed((server.address() as net.AddressInfo).port)))
  })

const close = (server: net.Server, open: Set<net.Socket>) =>
  Effect.async<void>((resume) => {
    for (const socket of open) socket.destroy()
    server.close(() => resume(Effect.void))
  })

/** An HTTPS server on `host` (127.0.0.1 by default) presenting the test certificate. */
export const httpsServer = (
  handler: Handler,
  options: { readonly host?: string; readonly port?: number; readonly cert?: { cert: string; key: string } } = {}
) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const requests: Array<RecordedRequest> = []
      const { cert, key } = options.cert ?? material
      const server = https.createServer({ cert, key }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const recorded: RecordedRequest = {
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            servername: (req.socket as TLSSocket).servername || null,
            body: Buffer.concat(chunks)
          }
          requests.push(recorded)
          handler(recorded, res, req)
        })
      })
      const counts = tracked(server)
      const port = yield* listen(server, options.host ?? "127.0.0.1", options.port ?? 0).pipe(Effect.orDie)
      const result: TestServer = {
        port,
        requests,
        connections: counts.accepted,
        openConnections: () => counts.open.size
      }
      return { result, server, open: counts.open }
    }),
    ({ open, server }) => close(server, open)
  ).pipe(Effect.map(({ result }) => result))

/** A TCP listener that accepts and counts connections and never answers. */
export const silentListener = (options: { readonly host?: string; readonly port?: number } = {}) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const server = net.createServer(() => undefined)
      const counts = tracked(server)
      const port = yield* listen(server, options.host ?? "127.0.0.1", options.port ?? 0).pipe(Effect.orDie)
      const result: TestServer = { port, requests: [], connections: counts.accepted, openConnections: () => counts.open.size }
      return { result, server, open: counts.open }
    }),
    ({ open, server }) => close(server, open)
  ).pipe(Effect.map(({ result }) => result))

/** Answers every request with 200 and a small JSON body. */
export const ok: Handler = (_, res) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end("{\"ok\":true}")
}

/** A DnsResolver that counts its calls per host, over a static map. */
export class ResolverCalls extends Context.Tag("test/ResolverCalls")<ResolverCalls, Map<string, number>>() {}

/** The static test resolver plus a per-host call counter. */
export const countingResolver = (records: Readonly<Record<string, StaticAnswer>>) =>
  Layer.effectContext(
    Effect.gen(function*() {
      const inner = yield* DnsResolver
      const calls = new Map<string, number>()
      const counting = DnsResolver.of({
        resolve: (host) =>
          Effect.suspend(() => {
            calls.set(host, (calls.get(host) ?? 0) + 1)
            return inner.resolve(host)
          })
      })
      return Context.make(DnsResolver, counting).pipe(Context.add(ResolverCalls, calls))
    })
  ).pipe(Layer.provide(DnsResolver.layerStatic(records)))

/** Egress trusting the test CA, reaching only the listed private CIDRs, over a static resolver. */
export const testEgress = (
  records: Readonly<Record<string, StaticAnswer>>,
  options: EgressOptions = {}
): Layer.Layer<Egress | ResolverCalls> =>
  Egress.layerWith({ extraCa: material.ca, deadline: PATIENT_DEADLINE, ...options }).pipe(
    Layer.provideMerge(countingResolver(records))
  )

/**
 * The deadline of `testEgress` unless a test sets one: tests of other rules must not depend on the
 * 10 s deadline, which slow TLS handshakes on a loaded machine can pass.
 */
export const PATIENT_DEADLINE = "10 minutes"

/** The loopback answer for the test names. */
export const LOOPBACK_DNS: Readonly<Record<string, StaticAnswer>> = {
  "bridge.test": ["127.0.0.1"],
  "receiver.test": ["127.0.0.1"]
}
