/**
 * A loopback HTTP server answering every request with one fixed answer: what a
 * proxy in front of crm-relay says when the service is down (502), or a server
 * that is not the Event API at all.
 */
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** Starts the stub for the scope; answers its base URL. */
export const stub = (status: number, headers: Record<string, string>, body: string) =>
  Effect.map(
    Effect.acquireRelease(
      Effect.async<Http.Server>((resume) => {
        const server = Http.createServer((req, res) => {
          req.resume()
          req.on("end", () => res.writeHead(status, headers).end(body))
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) => Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    ),
    (server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  )

/** A loopback base URL where nothing listens (a port just released). */
export const refusedUrl = Effect.scoped(stub(200, {}, ""))
