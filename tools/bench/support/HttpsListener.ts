/**
 * An HTTPS server on 127.0.0.1 (a free port) for the scope, with the
 * benchmark's certificate: the receivers and bridges benchmarks stand up.
 * Its open connections are tracked so a run can drop them between rounds,
 * and are closed with it.
 */
import type { Certificate } from "@crm-relay/testing"
import { Effect, type Scope } from "effect"
import type * as Http from "node:http"
import * as Https from "node:https"
import type { AddressInfo, Socket } from "node:net"

/** A listening server: its port, and `hangUp` to drop every open connection. */
export interface HttpsListener {
  readonly port: number
  readonly hangUp: Effect.Effect<void>
}

/**
 * Serves `handler` for the scope (keep-alive 60 s, as a receiver behind a load balancer would);
 * `onConnection` is called for each TLS connection accepted.
 */
export const listen = (
  tls: Certificate.TlsMaterial,
  handler: (request: Http.IncomingMessage, response: Http.ServerResponse) => void,
  onConnection: () => void = () => {}
): Effect.Effect<HttpsListener, never, Scope.Scope> =>
  Effect.gen(function*() {
    const sockets = new Set<Socket>()
    const server = Https.createServer({ cert: tls.cert, key: tls.key, keepAliveTimeout: 60_000 }, handler)
    server.on("secureConnection", (socket: Socket) => {
      onConnection()
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    const hangUp = Effect.sync(() => {
      for (const socket of sockets) socket.destroy()
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          for (const socket of sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    return { port: (server.address() as AddressInfo).port, hangUp }
  })

/** The request's body as text, then `then` (the request fully read). */
export const readBody = (request: Http.IncomingMessage, then: (body: string) => void) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => then(Buffer.concat(chunks).toString("utf8")))
}
