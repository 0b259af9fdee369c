/**
 * A loopback TCP proxy in front of PostgreSQL, so a test can make the
 * database unreachable (`cut`: refuse new connections, drop open ones)
 * without touching the real server.
 */
import { Effect, type Scope } from "effect"
import * as Net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Closes the listener and every open connection. */
  readonly cut: Effect.Effect<void>
}

export const make = (target: { readonly host: string; readonly port: number }): Effect.Effect<TcpProxy, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket> }>((resume) => {
      const sockets = new Set<Net.Socket>()
      const server = Net.createServer((client) => {
        const upstream = Net.connect(target.port, target.host)
        sockets.add(client)
        sockets.add(upstream)
        const close = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        client.on("error", close).on("close", close)
        upstream.on("error", close).on("close", close)
        client.pipe(upstream)
        upstream.pipe(client)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, sockets })))
    }),
    ({ server, sockets }) =>
      Effect.sync(() => {
        for (const socket of sockets) socket.destroy()
        server.close()
      })
  ).pipe(
    Effect.map(({ server, sockets }) => ({
      port: (server.address() as Net.AddressInfo).port,
      cut: Effect.sync(() => {
        server.close()
        for (const socket of sockets) socket.destroy()
      })
    }))
  )
