/**
 * The lingering close of RFC 9112 §9.6, as nginx does it: a connection
 * answered before its request body was read (a 413) is closed half first:
 * the answer and a FIN go out, and what the client still sends is read and
 * discarded for at most `LINGER_MS`, then the connection is closed. Closed at
 * once, the unread bytes would make the kernel reset it, and a client still
 * writing its body would lose the answer (EPIPE, never reading the 413). The
 * connection stays open, and counted in the listener's budget, meanwhile.
 */
import type * as Http from "node:http"
import type { Socket } from "node:net"

/** How long a connection closed before its request body was read keeps reading (and discarding) it. */
export const LINGER_MS = 5_000

/**
 * Makes `server` linger when Node closes a connection after an answer with
 * `Connection: close` while the request's body is still arriving.
 * `current` names the request a connection is on (see HttpConnections).
 */
export const install = (server: Http.Server, current: (socket: Socket) => Http.IncomingMessage | undefined, lingerMs = LINGER_MS): void => {
  server.on("connection", (socket: Socket) => {
    // Node calls it once the answer of a `Connection: close` exchange is written.
    const destroySoon = socket.destroySoon.bind(socket)
    let lingering = false
    socket.destroySoon = () => {
      const request = current(socket)
      if (request === undefined || request.complete || socket.destroyed) return destroySoon()
      if (lingering) return
      lingering = true
      // Node's parser keeps reading: the rest of the body goes to the answered request, which discards it.
      request.resume()
      socket.end()
      const bound = setTimeout(() => socket.destroy(), lingerMs)
      bound.unref()
      socket.once("close", () => clearTimeout(bound))
    }
  })
}
