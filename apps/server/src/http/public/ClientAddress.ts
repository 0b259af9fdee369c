/**
 * The client address of a public request: the socket's peer, or — only when
 * that peer is one of the configured trusted proxies — the address its
 * `X-Forwarded-For` names (the rightmost hop that is not itself a trusted
 * proxy, so a client cannot pick its own address by prepending entries).
 * From any other peer the header is ignored: anyone can send it.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import * as AddressPolicy from "@crm-relay/bridge/AddressPolicy"
import { Effect, Option } from "effect"

/** The client address for a request from `peer` carrying `forwardedFor`, under `trusted`. */
export const resolve = (
  trusted: ReadonlyArray<AddressPolicy.Cidr>,
  peer: string | undefined,
  forwardedFor: string | undefined
): string | undefined => {
  if (peer === undefined || forwardedFor === undefined || !AddressPolicy.inList(trusted, peer)) return peer
  const hops = forwardedFor.split(",").map((hop) => hop.trim())
  let client = peer
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!
    // A hop that is no address ends the chain: the last trusted hop is as far as we can believe.
    if (AddressPolicy.parseAddress(hop) === undefined) return client
    client = hop
    if (!AddressPolicy.inList(trusted, hop)) return hop
  }
  return client
}

/** The middleware setting each request's `remoteAddress` to its client address (no change without trusted proxies). */
export const middleware = (trusted: ReadonlyArray<AddressPolicy.Cidr>) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  trusted.length === 0 ? app : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const peer = Option.getOrUndefined(request.remoteAddress)
    const header = request.headers["x-forwarded-for"]
    const client = resolve(trusted, peer, header)
    return client === peer || client === undefined
      ? app
      : Effect.provideService(app, HttpServerRequest.HttpServerRequest, request.modify({ remoteAddress: client }))
  })
