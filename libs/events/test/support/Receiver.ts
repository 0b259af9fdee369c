/**
 * Webhook receivers for tests: real HTTPS servers on loopback that record
 * every request (headers, body, arrival time) and answer from a per-path
 * script (status, headers, body, delay). Servers that must never be reached
 * (127.0.0.2, ::1) record too, so a test can prove they received nothing.
 */
import { Certificate } from "@crm-relay/testing"
import { Effect, type Scope } from "effect"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"

/** One recorded request. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Real time of arrival (ms since the epoch). */
  readonly at: number
}

/** One scripted answer. */
export interface Answer {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>>
  /** The body; default `{"ok":true}`. */
  readonly body?: string | Uint8Array
  /** Real milliseconds to wait before answering. */
  readonly delayMs?: number
}

/** A running receiver. */
export interface Receiver {
  /** `https://<host>:<port><path>`. */
  readonly url: (path: string, host?: string) => string
  readonly port: number
  /** Requests received on `path` (all paths when omitted), in order. */
  readonly received: (path?: string) => ReadonlyArray<Received>
  /** Answers for `path`, in order; the last one repeats. Default: 200 with `{"ok":true}`. */
  readonly script: (path: string, answers: ReadonlyArray<Answer>) => void
}

/** Starts a receiver on `host` (default 127.0.0.1) with `tls`, closed with the scope. */
export const make = (
  tls: Certificate.TlsMaterial,
  host = "127.0.0.1"
): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received: Array<Received> = []
    const scripts = new Map<string, ReadonlyArray<Answer>>()
    const served = new Map<string, number>()
    const server = Https.createServer({ cert: tls.cert, key: tls.key }, (request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const path = request.url ?? "/"
        const headers: Record<string, string> = {}
        for (const [name, value] of Object.entries(request.headers)) {
          if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
        }
        received.push({ method: request.method ?? "", path, headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() })
        const key = path.split("?")[0]!
        const answers = scripts.get(key) ?? []
        const n = served.get(key) ?? 0
        served.set(key, n + 1)
        const answer: Answer = answers[Math.min(n, answers.length - 1)] ?? { status: 200 }
        const reply = () => {
          if (response.destroyed) return
          response.writeHead(answer.status, { "content-type": "application/json", ...answer.headers })
          response.end(answer.body ?? "{\"ok\":true}")
        }
        if (answer.delayMs === undefined) reply()
        else setTimeout(reply, answer.delayMs)
      })
    })
    // Idle keep-alive connections stay open until the client drops them: a server closing one just as the
    // client reuses it (likely on a loaded machine) would fail an exchange that no test is about.
    server.keepAliveTimeout = 0
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(0, host, () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as AddressInfo).port
    const bracketed = host.includes(":") ? `[${host}]` : host
    return {
      port,
      url: (path, name = bracketed) => `https://${name}:${port}${path}`,
      received: (path) => (path === undefined ? received : received.filter((r) => r.path.split("?")[0] === path)),
      script: (path, answers) => {
        scripts.set(path, answers)
        served.set(path, 0)
      }
    }
  })
