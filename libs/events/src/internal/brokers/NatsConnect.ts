/**
 * Connecting to NATS so that an attempt given up at its timeout closes its
 * socket. The client (@nats-io/transport-node 3.4) leaves that socket open:
 * its transport's `close` ignores a connection that never completed, so a
 * server that accepts TCP and never sends its INFO kept one file descriptor
 * per attempt for good. Our transport is the client's, except that closing
 * an attempt that never completed destroys its socket.
 */
import { type NatsConnection, NatsConnectionImpl, type NodeConnectionOptions, setTransportFactory } from "@nats-io/transport-node"
import { nodeResolveHost, NodeTransport } from "@nats-io/transport-node/lib/node_transport.js"

/** The client's transport, closing the socket of an attempt that never completed. */
class ClosingTransport extends NodeTransport {
  override close(err?: Error): Promise<void> {
    if (this.connected) return super.close(err)
    // What the client does with a transport it replaces: done, listeners off, socket destroyed.
    this.discard()
    return Promise.resolve()
  }
}

const transport = { factory: () => new ClosingTransport(), dnsResolveFn: nodeResolveHost }

/**
 * `connect` of @nats-io/transport-node over `ClosingTransport`. The client keeps its transport
 * factory in one global, which its own `connect` sets on every call: set again here on every call
 * (reconnects read it too), so a process whose NATS connections all come through here uses ours.
 */
export const connect = (options: NodeConnectionOptions): Promise<NatsConnection> => {
  setTransportFactory(transport)
  return NatsConnectionImpl.connect(options)
}
