/**
 * A loopback TCP listener that accepts connections and never answers: a
 * broker (or any server) that went silent, for timeout tests.
 */
import { Effect } from "effect"
import * as Net from "node:net"

/** A silent listener for the scope: its port and how many connections it has accepted so far. */
export const start = Effect.acquireRelease(
  Effect.async<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket>; readonly accepted: () => number; readonly port: number }>((resume) => {
    const sockets = new Set<Net.Socket>()
    let accepted = 0
    const server = Net.createServer((socket) => {
      accepted++
      sockets.add(socket)
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
).pipe(Effect.map(({ port, accepted }) => ({ port, connections: accepted })))
