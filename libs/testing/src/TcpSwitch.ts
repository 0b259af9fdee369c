/**
 * A loopback TCP forwarder whose target can be switched, for one test: what
 * a client sees behind a DNS name or a plain TCP balancer during a failover.
 * New connections go to the current target; connections already open keep
 * theirs (as a balancer that does not close old sessions) until `cutAll`.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as Net from "node:net"

export interface TcpSwitch {
  readonly port: number
  /** New connections go to `port` from now on. */
  readonly switchTo: (port: number) => void
  /** Closes every open connection (as a balancer that shuts down sessions). */
  readonly cutAll: Effect.Effect<void>
}

/** A switch on a free loopback port for the scope, forwarding to `target`. */
export const start = (target: number): Effect.Effect<TcpSwitch, never, Scope.Scope> =>
  Effect.gen(function*() {
    let current = target
    const open = new Set<Net.Socket>()
    const server = Net.createServer((client) => {
      const upstream = Net.connect({ host: "127.0.0.1", port: current })
      open.add(client)
      open.add(upstream)
      const close = () => {
        client.destroy()
        upstream.destroy()
        open.delete(client)
        open.delete(upstream)
      }
      client.on("error", close).on("close", close)
      upstream.on("error", close).on("close", close)
      client.pipe(upstream)
      upstream.pipe(client)
    })
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const socket of open) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    return {
      port,
      switchTo: (next) => {
        current = next
      },
      cutAll: Effect.sync(() => {
        for (const socket of open) socket.destroy()
        open.clear()
      })
    }
  })
