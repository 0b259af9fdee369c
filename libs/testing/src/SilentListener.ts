/**
 * A loopback TCP listener that accepts connections and never answers: a
 * broker (or any server) that went silent, for timeout tests.
 */
import { Effect } from "effect"
import * as Net from "node:net"

/** A silent listener for the scope: its port, how many connections it has accepted so far and how many are still open. */
export const start = Effect.acquireRelease(
  Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; readonly accepted: () => number; readonly port: number }>((resume) => {
    const sockets = new Set<Net.Socket>()
    let accepted = 0
    const server = Net.createServer((socket) => {
      accepted++
      sockets.add(socket)
      // Read and drop what the client sends (never answering): a client's close is then seen, as the broker's kernel would.
      socket.resume()
      socket.on("error", () => {})
      socket.on("close", () => sockets.delete(socket))
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ server, sockets, accepted: () => accepted, port }))
    })
  }),
  ({ server, sockets }) =>
    Effect.async<void>((resume) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ port, accepted, sockets }) => ({ port, connections: accepted, open: () => sockets.size })))

/**
 * A loopback listener in front of `port` on 127.0.0.1 that forwards until `silence` runs, then
 * cuts what it forwards and goes silent: it accepts every new connection and never answers. A
 * target that must answer once (a destination's check at creation) and then stop.
 */
export const inFront = (port: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; readonly state: { silent: boolean; accepted: number } }>(
      (resume) => {
        const sockets = new Set<Net.Socket>()
        const state = { silent: false, accepted: 0 }
        const track = (socket: Net.Socket) => {
          sockets.add(socket)
          socket.on("error", () => {})
          socket.on("close", () => sockets.delete(socket))
        }
        const server = Net.createServer((socket) => {
          track(socket)
          state.accepted++
          if (state.silent) return
          const upstream = Net.connect(port, "127.0.0.1")
          track(upstream)
          socket.pipe(upstream).pipe(socket)
          upstream.on("close", () => socket.destroy())
          socket.on("close", () => upstream.destroy())
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, sockets, state })))
      }
    ),
    ({ server, sockets }) =>
      Effect.async<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ server, sockets, state }) => {
    const address = server.address()
    return {
      port: typeof address === "object" && address !== null ? address.port : 0,
      /** From now on: the forwarded connections are cut, and new ones are accepted and never answered. */
      silence: Effect.sync(() => {
        state.silent = true
        for (const socket of sockets) socket.destroy()
      }),
      /** Connections accepted so far. */
      connections: () => state.accepted
    }
  }))
