/**
 * Egress for message brokers (RabbitMQ over AMQP 0-9-1, NATS): the same
 * address policy as HTTPS egress, applied to a broker URL before any client
 * connects. It answers the one address to dial (pinned) and the host name TLS
 * must verify, so a broker client never resolves names itself.
 *
 * TLS by default (`amqps://`, `tls://`); a plain scheme (`amqp://`,
 * `nats://`) only when every address of the host is inside
 * `EGRESS_ALLOW_PRIVATE`, i.e. a development broker on an allowed network.
 */
import { Context, Effect, Either, Layer, Metric } from "effect"
import type { ConfigError } from "effect"
import { isIP } from "node:net"
import * as AddressPolicy from "./AddressPolicy.js"
import { DnsResolver } from "./DnsResolver.js"
import { refusalsByReason } from "./Egress.js"
import * as EgressConfig from "./EgressConfig.js"
import { addressRefusal } from "./internal/egress/addressRefusal.js"
import { EgressNetworkError, EgressRefused } from "./internal/egress/EgressError.js"

/** The broker protocols egress knows. */
export type BrokerProtocol = "amqp" | "nats"

/** Where a broker client may connect: a validated address, pinned. */
export interface BrokerTarget {
  readonly protocol: BrokerProtocol
  /** The host of the URL (no brackets): what logs and TLS name. */
  readonly host: string
  /** The address to dial, already checked against the policy. */
  readonly address: string
  readonly port: number
  readonly tls: boolean
  /** The name TLS verifies (SNI); `undefined` for a literal-address host. */
  readonly servername: string | undefined
  /** AMQP: the virtual host named by the URL's path ("/" when none). */
  readonly vhost: string
}

interface Scheme {
  readonly protocol: BrokerProtocol
  readonly tls: boolean
  readonly port: number
}

const SCHEMES: Readonly<Record<string, Scheme>> = {
  "amqps:": { protocol: "amqp", tls: true, port: 5671 },
  "amqp:": { protocol: "amqp", tls: false, port: 5672 },
  "tls:": { protocol: "nats", tls: true, port: 4222 },
  "nats:": { protocol: "nats", tls: false, port: 4222 }
}

const EXPECTED: Readonly<Record<BrokerProtocol, string>> = {
  amqp: "amqps:// (amqp:// only on an address EGRESS_ALLOW_PRIVATE allows)",
  nats: "tls:// (nats:// only on an address EGRESS_ALLOW_PRIVATE allows)"
}

/** What a broker URL says, before any DNS: checked against the URL rules. */
interface ParsedBrokerUrl extends Scheme {
  readonly host: string
  readonly vhost: string
}

/** Checks a broker URL's shape for `protocol`; pure, so creation can refuse bad input early. */
export const parseBrokerUrl = (protocol: BrokerProtocol, text: string): Either.Either<ParsedBrokerUrl, EgressRefused> => {
  const url = URL.parse(text)
  if (url === null || url.hostname === "") return Either.left(new EgressRefused({ reason: "invalid_url", host: "" }))
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  const scheme = SCHEMES[url.protocol]
  if (scheme === undefined || scheme.protocol !== protocol) {
    return Either.left(
      new EgressRefused({ reason: "broker_scheme", host, detail: `${url.protocol}// where ${EXPECTED[protocol]} is expected` })
    )
  }
  if (url.username !== "" || url.password !== "") return Either.left(new EgressRefused({ reason: "url_credentials", host }))
  if (url.search !== "" || url.hash !== "") {
    return Either.left(new EgressRefused({ reason: "query_or_fragment", host, detail: url.search !== "" ? "query string" : "fragment" }))
  }
  const path = decodeURIComponent(url.pathname)
  if (protocol === "nats" && path !== "" && path !== "/") {
    return Either.left(new EgressRefused({ reason: "invalid_request", host, detail: "a NATS URL has no path" }))
  }
  // amqp://host/ and amqp://host name the default virtual host "/"; amqp://host/v names "v".
  const vhost = path === "" || path === "/" ? "/" : path.slice(1)
  return Either.right({ ...scheme, port: url.port === "" ? scheme.port : Number(url.port), host, vhost })
}

/** Resolves broker URLs to pinned, policy-checked addresses. */
export class BrokerEgress extends Context.Tag("@crm-relay/bridge/BrokerEgress")<BrokerEgress, {
  /** Checks `url` for `protocol`, resolves its host and answers the address to dial; never connects. */
  readonly resolve: (
    protocol: BrokerProtocol,
    url: string
  ) => Effect.Effect<BrokerTarget, EgressRefused | EgressNetworkError>
}>() {
  /** Configured from `EGRESS_ALLOW_PRIVATE`; needs a `DnsResolver`. */
  static readonly layer: Layer.Layer<BrokerEgress, ConfigError.ConfigError, DnsResolver> = Layer.effect(
    BrokerEgress,
    Effect.flatMap(EgressConfig.allowPrivate, (allowPrivate) => make(AddressPolicy.make(allowPrivate)))
  )

  /** `BrokerEgress.layer` over the operating system resolver. */
  static readonly Default: Layer.Layer<BrokerEgress, ConfigError.ConfigError> = BrokerEgress.layer.pipe(
    Layer.provide(DnsResolver.layerSystem)
  )

  /** With explicit allowed private CIDRs (tests, benches); an invalid CIDR is a defect. */
  static readonly layerWith = (allowPrivate: ReadonlyArray<string> = []): Layer.Layer<BrokerEgress, never, DnsResolver> =>
    Layer.effect(
      BrokerEgress,
      Effect.suspend(() => {
        const parsed = AddressPolicy.parseCidrList(allowPrivate.join(","))
        return Either.isLeft(parsed)
          ? Effect.dieMessage(`BrokerEgress.layerWith: ${parsed.left}`)
          : make(AddressPolicy.make(parsed.right))
      })
    )
}

const make = (policy: AddressPolicy.AddressPolicy) =>
  Effect.map(DnsResolver, (resolver) => {
    const answersOf = (host: string) =>
      isIP(host) !== 0
        ? Effect.succeed([host])
        : resolver.resolve(host).pipe(
          Effect.map((answers) => answers.map((answer) => answer.address)),
          Effect.mapError((error) =>
            new EgressNetworkError({ host, kind: "dns", code: error.code, reason: `the host name could not be resolved (${error.code})` })
          )
        )

    const resolve = (protocol: BrokerProtocol, url: string) =>
      Effect.gen(function*() {
        const parsed = parseBrokerUrl(protocol, url)
        if (Either.isLeft(parsed)) return yield* Effect.fail(parsed.left)
        const { host } = parsed.right
        const addresses = yield* answersOf(host)
        // Every answer must pass, as for HTTPS: one hostile answer refuses the host.
        for (const address of addresses) {
          const refusal = addressRefusal(policy, host, address)
          if (refusal !== undefined) return yield* Effect.fail(refusal)
          if (!parsed.right.tls && policy.check(address)._tag !== "AllowedPrivate") {
            return yield* Effect.fail(new EgressRefused({ reason: "plain_broker", host, address, detail: `${protocol.toUpperCase()} connection` }))
          }
        }
        const [pinned] = addresses
        if (pinned === undefined) {
          return yield* Effect.fail(new EgressNetworkError({ host, kind: "dns", code: "ENODATA", reason: "the host name has no address (ENODATA)" }))
        }
        return {
          protocol,
          host,
          address: pinned,
          port: parsed.right.port,
          tls: parsed.right.tls,
          servername: isIP(host) === 0 ? host : undefined,
          vhost: parsed.right.vhost
        } satisfies BrokerTarget
      }).pipe(
        // A refusal is a security event worth a warning and a count, as for HTTPS egress.
        Effect.tapError((error) =>
          error._tag === "EgressRefused"
            ? Effect.logWarning(error.message).pipe(
              Effect.annotateLogs({ purpose: `broker_${protocol}`, reason: error.reason }),
              Effect.zipRight(Metric.increment(refusalsByReason[error.reason]))
            )
            : Effect.void
        ),
        Effect.withSpan("BrokerEgress.resolve", { attributes: { protocol } })
      )

    return BrokerEgress.of({ resolve })
  })
