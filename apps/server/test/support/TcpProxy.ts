/**
 * A loopback TCP proxy in front of a server (PostgreSQL, a broker), so a
 * test can make it unreachable (`cut`: refuse new connections, drop open
 * ones) without touching the real server, and count the connections through
 * it still open.
 */
import { Effect, type Scope } from "effect"
import * as Net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Closes the listener and every open connection. */
  readonly cut: Effect.Effect<void>
  /** The clients' connections through the proxy still open. */
  readonly connected: () => number
}

export const make = (target: { readonly host: string; readonly port: number }): Effect.Effect<TcpProxy, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; readonly clients: Set<Net.Socket> }>((resume) => {
      const sockets = new Set<Net.Socket>()
      const clients = new Set<Net.Socket>()
      const server = Net.createServer((client) => {
        const upstream = Net.connect(target.port, target.host)
        sockets.add(client)
        sockets.add(upstream)
        clients.add(client)
        const close = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
          clients.delete(client)
        }
        client.on("error", close).on("close", close)
        upstream.on("error", close).on("close", close)
        client.pipe(upstream)
        upstream.pipe(client)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, sockets, clients })))
    }),
    ({ server, sockets }) =>
      Effect.sync(() => {
        for (const socket of sockets) socket.destroy()
        server.close()
      })
  ).pipe(
    Effect.map(({ server, sockets, clients }) => ({
      port: (server.address() as Net.AddressInfo).port,
      cut: Effect.sync(() => {
        server.close()
        for (const socket of sockets) socket.destroy()
      }),
      connected: () => clients.size
    }))
  )
