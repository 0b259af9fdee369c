/**
 * An HTTPS webhook receiver for the browser tests: records every request and
 * checks its Standard Webhooks signature against the account's secret (given
 * by the test); answers each path with the status the test set (200 by default).
 */
import type { Certificate } from "@crm-relay/testing"
import { Effect, type Scope } from "effect"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"

export interface Received {
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Whether the signature verified with the secret set for the receiver (null: none set). */
  readonly verified: boolean | null
}

export interface Receiver {
  readonly ca: string
  readonly url: (path: string) => string
  readonly received: () => ReadonlyArray<Received>
  /** The status `path` answers from now on. */
  readonly answer: (path: string, status: number) => void
  /** The `whsec_` secret deliveries must be signed with. */
  readonly expectSecret: (secret: string) => void
}

export const make = (tls: Certificate.TlsMaterial, host: string): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received: Array<Received> = []
    const statuses = new Map<string, number>()
    let secret: string | undefined
    const server = Https.createServer({ cert: tls.cert, key: tls.key }, (request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        const headers: Record<string, string> = {}
        for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers[name] = value
        let verified: boolean | null = null
        if (secret !== undefined) {
          try {
            new Webhook(secret).verify(body, headers)
            verified = true
          } catch {
            verified = false
          }
        }
        const path = request.url ?? "/"
        received.push({ path, headers, body, verified })
        response.writeHead(statuses.get(path) ?? 200, { "content-type": "application/json" })
        response.end("{\"ok\":true}")
      })
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () => Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    )
    const port = (server.address() as AddressInfo).port
    return {
      ca: tls.ca,
      url: (path) => `https://${host}:${port}${path}`,
      received: () => received,
      answer: (path, status) => void statuses.set(path, status),
      expectSecret: (value) => {
        secret = value
      }
    }
  })
