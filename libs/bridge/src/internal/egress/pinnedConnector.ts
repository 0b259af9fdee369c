/**
 * The undici connector that only opens sockets to validated addresses.
 *
 * Name resolution runs inside the socket's own `lookup`, so the addresses a
 * connection may use are exactly the ones just checked: there is no second
 * resolution for a rebinding answer to slip into. The TLS server name and the
 * certificate check stay on the original host name (undici passes it as
 * `servername`). Literal-IP hosts skip `lookup`, so they are checked here too.
 */
import { Cause, Effect, Exit, Option, Runtime } from "effect"
import type { LookupAddress, LookupOptions } from "node:dns"
import { isIP, type LookupFunction } from "node:net"
import { buildConnector } from "undici"
import type * as AddressPolicy from "../../AddressPolicy.js"
import type { DnsResolver } from "../../DnsResolver.js"
import { addressRefusal } from "./addressRefusal.js"
import { EgressNetworkError, type EgressError } from "./EgressError.js"

/** What the connector needs. */
export interface PinnedConnectorOptions {
  readonly resolver: DnsResolver["Type"]
  readonly policy: AddressPolicy.AddressPolicy
  readonly runtime: Runtime.Runtime<never>
  /** Extra trusted CA certificates (PEM), added to Node's default store. */
  readonly ca: ReadonlyArray<string> | undefined
  /** TCP + TLS connect timeout. */
  readonly connectTimeoutMs: number
}

/** Resolves `host` and fails unless every answer is permitted. */
export const resolveChecked = (
  resolver: DnsResolver["Type"],
  policy: AddressPolicy.AddressPolicy,
  host: string
): Effect.Effect<ReadonlyArray<LookupAddress>, EgressError> =>
  resolver.resolve(host).pipe(
    Effect.mapError((error) =>
      new EgressNetworkError({ host, kind: "dns", code: error.code, reason: `the host name could not be resolved (${error.code})` })
    ),
    Effect.flatMap((answers) => {
      for (const answer of answers) {
        const refusal = addressRefusal(policy, host, answer.address)
        if (refusal !== undefined) return Effect.fail(refusal)
      }
      return Effect.succeed(answers.map(({ address, family }) => ({ address, family })))
    })
  )

const causeToError = (host: string, cause: Cause.Cause<EgressError>): Error =>
  Option.getOrElse(
    Cause.failureOption(cause),
    () => new EgressNetworkError({ host, kind: "dns", reason: "name resolution was interrupted or crashed" })
  )

const makeLookup = (options: PinnedConnectorOptions): LookupFunction => {
  const run = Runtime.runCallback(options.runtime)
  return (hostname: string, lookupOptions: LookupOptions, callback) => {
    const resolution = resolveChecked(options.resolver, options.policy, hostname).pipe(
      // Per connection, not per exchange: a resolver that never answers must not pin a fiber forever.
      Effect.timeoutFail({
        duration: options.connectTimeoutMs,
        onTimeout: () => new EgressNetworkError({ host: hostname, kind: "dns", code: "ETIMEOUT", reason: "name resolution timed out" })
      })
    )
    run(resolution, {
      onExit: (exit) =>
        // Answer asynchronously, as dns.lookup does.
        process.nextTick(() => {
          if (Exit.isFailure(exit)) return callback(causeToError(hostname, exit.cause), [])
          const family = lookupOptions.family === 4 || lookupOptions.family === "IPv4"
            ? 4
            : lookupOptions.family === 6 || lookupOptions.family === "IPv6"
            ? 6
            : 0
          const addresses = family === 0 ? exit.value : exit.value.filter((a) => a.family === family)
          const first = addresses[0]
          if (first === undefined) {
            return callback(
              new EgressNetworkError({ host: hostname, kind: "dns", reason: `the host name has no IPv${family} address` }),
              []
            )
          }
          return lookupOptions.all === true ? callback(null, [...addresses]) : callback(null, first.address, first.family)
        })
    })
  }
}

/** Builds the connector for one egress Agent. */
export const makePinnedConnector = (options: PinnedConnectorOptions): buildConnector.connector => {
  const base = buildConnector({
    lookup: makeLookup(options),
    // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment cannot switch verification off.
    rejectUnauthorized: true,
    timeout: options.connectTimeoutMs,
    ...(options.ca === undefined ? {} : { ca: [...options.ca] })
  })
  return (connectOptions, callback) => {
    // undici strips the brackets of an IPv6 literal before calling the connector.
    if (isIP(connectOptions.hostname) !== 0) {
      const refusal = addressRefusal(options.policy, connectOptions.hostname, connectOptions.hostname)
      if (refusal !== undefined) return process.nextTick(() => callback(refusal, null))
    }
    return base(connectOptions, callback)
  }
}
