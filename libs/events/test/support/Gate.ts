/**
 * A loopback TCP gate in front of a broker: closed, it accepts and drops
 * every connection at once (a broker that cannot take a message now);
 * opened, it forwards to the broker. The destination kit's "flaky" target,
 * and its "outage" one: `close` drops every connection through it too.
 */
import { Effect } from "effect"
import * as Net from "node:net"

interface State {
  open: number | undefined
  accepted: number
  readonly clients: Set<Net.Socket>
}

/** A gate for the scope, closed at first; `open` starts forwarding to `port` on 127.0.0.1. */
export const start = Effect.acquireRelease(
  Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; readonly state: State }>(
    (resume) => {
      const sockets = new Set<Net.Socket>()
      const state: State = { open: undefined, accepted: 0, clients: new Set() }
      const track = (socket: Net.Socket) => {
        sockets.add(socket)
        socket.on("error", () => {})
        socket.on("close", () => sockets.delete(socket))
      }
      const server = Net.createServer((socket) => {
        track(socket)
        state.accepted++
        state.clients.add(socket)
        socket.on("close", () => state.clients.delete(socket))
        if (state.open === undefined) return socket.destroy()
        const upstream = Net.connect(state.open, "127.0.0.1")
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
    open: (port: number) => Effect.sync(() => void (state.open = port)),
    /** Closes the gate and drops every connection through it, as a host gone from the network. */
    close: Effect.sync(() => {
      state.open = undefined
      for (const socket of sockets) socket.destroy()
    }),
    /** Connections accepted so far, and those still open. */
    accepted: () => state.accepted,
    connected: () => state.clients.size
  }
}))
