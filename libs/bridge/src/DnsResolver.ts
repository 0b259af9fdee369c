/**
 * Host name resolution as a service, so egress can validate every answer and
 * tests can feed hostile answers without touching the system resolver.
 */
import { Context, Data, Effect, Layer } from "effect"
import * as dns from "node:dns"
import { isIP } from "node:net"

/** One address a host name resolved to. */
export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/** The host name has no usable address (NXDOMAIN, no data, resolver failure). */
export class DnsLookupError extends Data.TaggedError("DnsLookupError")<{
  readonly host: string
  /** The resolver's code, e.g. `ENOTFOUND` (NXDOMAIN) or `EAI_AGAIN`. */
  readonly code: string
}> {
  override get message(): string {
    return `The host name ${this.host} could not be resolved (${this.code}).`
  }
}

/**
 * What the static test resolver answers for one host: the same addresses every
 * time, a sequence of answers (call n gets entry n, the last one repeats), or a
 * resolver error code.
 */
export type StaticAnswer =
  | ReadonlyArray<string>
  | { readonly sequence: ReadonlyArray<ReadonlyArray<string>> }
  | { readonly error: string }

const toResolved = (address: string): ResolvedAddress => ({ address, family: isIP(address) === 6 ? 6 : 4 })

/** Resolves a host name to all of its addresses. */
export class DnsResolver extends Context.Tag("@crm-relay/bridge/DnsResolver")<DnsResolver, {
  /** Every address of `host`, in resolver order; fails when there is none. */
  readonly resolve: (host: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, DnsLookupError>
}>() {
  /** The operating system resolver (`dns.lookup` with `all: true`, verbatim order). */
  static readonly layerSystem: Layer.Layer<DnsResolver> = Layer.succeed(DnsResolver, {
    resolve: (host) =>
      Effect.async<ReadonlyArray<ResolvedAddress>, DnsLookupError>((resume) => {
        dns.lookup(host, { all: true, order: "verbatim" }, (error, addresses) => {
          if (error !== null) {
            resume(Effect.fail(new DnsLookupError({ host, code: error.code ?? "ERROR" })))
          } else if (addresses.length === 0) {
            resume(Effect.fail(new DnsLookupError({ host, code: "ENODATA" })))
          } else {
            resume(Effect.succeed(addresses.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }))))
          }
        })
      })
  })

  /**
   * A resolver fed from a static map, for tests. A host absent from the map is
   * NXDOMAIN (`ENOTFOUND`); an empty answer is `ENODATA`.
   */
  static readonly layerStatic = (records: Readonly<Record<string, StaticAnswer>>): Layer.Layer<DnsResolver> =>
    Layer.sync(DnsResolver, () => {
      // Host names are case-insensitive; a Map also keeps "constructor" and friends out.
      const answers = new Map(Object.entries(records).map(([host, answer]) => [host.toLowerCase(), answer]))
      const calls = new Map<string, number>()
      return {
        resolve: (host) =>
          Effect.suspend(() => {
            const key = host.toLowerCase()
            const record = answers.get(key)
            if (record === undefined) return Effect.fail(new DnsLookupError({ host, code: "ENOTFOUND" }))
            if ("error" in record) return Effect.fail(new DnsLookupError({ host, code: record.error }))
            const call = calls.get(key) ?? 0
            calls.set(key, call + 1)
            const answer = "sequence" in record
              ? record.sequence[Math.min(call, record.sequence.length - 1)] ?? []
              : record
            return answer.length === 0
              ? Effect.fail(new DnsLookupError({ host, code: "ENODATA" }))
              : Effect.succeed(answer.map(toResolved))
          })
      }
    })
}
