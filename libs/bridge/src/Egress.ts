/**
 * The one safe egress Layer: every outbound request of crm-relay (bridges,
 * OAuth token URLs, webhook deliveries) goes through `Egress.send`.
 *
 * Rules (Transport rules of the bridge contract, DESIGN "Outbound HTTP
 * safety"): HTTPS only; no URL credentials; no query or fragment unless the
 * call allows a query (a fragment is never sent); every DNS answer must be
 * public and the connection uses exactly the validated addresses while TLS
 * verifies the original host name; no redirects followed; proxy environment
 * variables ignored; `Accept-Encoding: identity` and encoded responses
 * refused; a 10 s deadline over the whole exchange including the body; 1 MiB
 * cap on request and response bodies, enforced while streaming.
 *
 * A call that needs only the status (a webhook receiver's answer) asks for
 * `responseBody: "discard"`: it is answered with the response head, and the
 * body, whatever its size or encoding, is drained unread up to 1 MiB.
 *
 * A kept-alive connection the server closes just as it is reused fails the
 * request before any answer byte: that request is sent again once, on a fresh
 * connection, with the same headers and body (a write keeps its
 * Idempotency-Key), within the same deadline. A failure after answer bytes
 * began, on a fresh connection, or of the second try is the caller's.
 */
import { Context, Duration, Effect, Either, Layer, Metric } from "effect"
import type { ConfigError } from "effect"
import * as tls from "node:tls"
import { Agent } from "undici"
import * as AddressPolicy from "./AddressPolicy.js"
import { DnsResolver } from "./DnsResolver.js"
import * as EgressConfig from "./EgressConfig.js"
import { makeDeadlines } from "./internal/egress/Deadlines.js"
import {
  type EgressError,
  type EgressRefused,
  EgressTimeout,
  MAX_BODY_BYTES,
  REFUSAL_REASONS,
  type RefusalReason
} from "./internal/egress/EgressError.js"
import { exchange, type StaleConnection } from "./internal/egress/exchange.js"
import { makePinnedConnector } from "./internal/egress/pinnedConnector.js"
import {
  type EgressRequest,
  type PreparedRequest,
  prepareRequest,
  type PreparedTarget,
  prepareTarget
} from "./internal/egress/prepareRequest.js"

export {
  EgressEncodingRefused,
  type EgressError,
  EgressNetworkError,
  EgressRefused,
  EgressResponseTooLarge,
  EgressTimeout,
  isEgressError,
  MAX_BODY_BYTES,
  type NetworkFailureKind,
  REFUSAL_REASONS,
  type RefusalReason
} from "./internal/egress/EgressError.js"
export type { EgressMethod, EgressRequest, EgressRequestOptions } from "./internal/egress/prepareRequest.js"

/** A response read in full (status 3xx included: redirects are the caller's to classify). */
export interface EgressResponse {
  readonly status: number
  /** Response headers, names lower-case, repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>
  /** The whole body, at most 1 MiB; empty when the request discards it. */
  readonly body: Uint8Array
  /** Wall time of the exchange, in milliseconds. */
  readonly durationMs: number
}

/** Options of `Egress.layerWith` (tests, the demo); `Egress.layer` reads them from config. */
export interface EgressOptions {
  /** CIDRs (or single addresses) reachable despite being private, e.g. ["127.0.0.1/32", "::1/128"]. */
  readonly allowPrivate?: ReadonlyArray<string>
  /** Extra trusted CA certificates (PEM), on top of Node's default store. */
  readonly extraCa?: string | ReadonlyArray<string>
  /** Total deadline per exchange, body included. Default 10 seconds. */
  readonly deadline?: Duration.DurationInput
}

/** The contract's total deadline per HTTP exchange. */
export const DEFAULT_DEADLINE: Duration.Duration = Duration.seconds(10)

interface Settings {
  readonly allowPrivate: ReadonlyArray<AddressPolicy.Cidr>
  readonly extraCa: ReadonlyArray<string>
  readonly deadline: Duration.Duration
}

/** Sends HTTPS requests under the egress rules. */
export class Egress extends Context.Tag("@crm-relay/bridge/Egress")<Egress, {
  /** Sends one request and reads the whole response; never follows a redirect. */
  readonly send: (request: EgressRequest) => Effect.Effect<EgressResponse, EgressError>
}>() {
  /** Egress configured from `EGRESS_ALLOW_PRIVATE`; needs a `DnsResolver`. */
  static readonly layer: Layer.Layer<Egress, ConfigError.ConfigError, DnsResolver> = Layer.scoped(
    Egress,
    Effect.flatMap(EgressConfig.allowPrivate, (allowPrivate) => make({ allowPrivate, extraCa: [], deadline: DEFAULT_DEADLINE }))
  )

  /** `Egress.layer` over the operating system resolver. */
  static readonly Default: Layer.Layer<Egress, ConfigError.ConfigError> = Egress.layer.pipe(
    Layer.provide(DnsResolver.layerSystem)
  )

  /**
   * Egress with explicit options (tests, demo); needs a `DnsResolver`. An
   * invalid CIDR in `allowPrivate` is a defect.
   */
  static readonly layerWith = (options: EgressOptions = {}): Layer.Layer<Egress, never, DnsResolver> =>
    Layer.scoped(
      Egress,
      Effect.suspend(() => {
        const parsed = AddressPolicy.parseCidrList((options.allowPrivate ?? []).join(","))
        if (Either.isLeft(parsed)) return Effect.dieMessage(`Egress.layerWith: ${parsed.left}`)
        const extraCa = options.extraCa === undefined ? [] : typeof options.extraCa === "string" ? [options.extraCa] : options.extraCa
        return make({
          allowPrivate: parsed.right,
          extraCa,
          deadline: Duration.decode(options.deadline ?? DEFAULT_DEADLINE)
        })
      })
    )
}

const closeAgent = (agent: Agent) =>
  Effect.tryPromise(() => agent.close()).pipe(
    Effect.timeout("1 second"),
    Effect.catchAll(() => Effect.tryPromise(() => agent.destroy())),
    Effect.ignore
  )

/** Outbound requests egress refused before connecting, by reason (metric). */
export const refusals = Metric.counter("crm_relay_egress_refusals_total", {
  description: "Outbound requests refused by the egress policy before any connection, by reason.",
  incremental: true
})
/** The refusal counter of each reason (`REFUSAL_REASONS`): the only series it has, each exported from the start. */
export const refusalsByReason = Object.fromEntries(
  REFUSAL_REASONS.map((reason) => [reason, Metric.tagged(refusals, "reason", reason)])
) as { readonly [R in RefusalReason]: Metric.Metric.Counter<number> }

/** Most URL checks `send` keeps. */
const MAX_TARGETS = 4096

const make = Effect.fnUntraced(function*(settings: Settings) {
  const resolver = yield* DnsResolver
  const clock = yield* Effect.clock
  const runtime = yield* Effect.runtime<never>()
  const policy = AddressPolicy.make(settings.allowPrivate)
  const timeoutMs = Duration.toMillis(settings.deadline)
  if (settings.allowPrivate.length > 0) {
    yield* Effect.logWarning(
      `Egress may reach private addresses in ${settings.allowPrivate.map((cidr) => cidr.text).join(", ")} ` +
        "(EGRESS_ALLOW_PRIVATE); this is for development and tests only and must never be set in production."
    )
  }
  const deadlines = yield* makeDeadlines(timeoutMs)
  // Made on the first request, not when the Layer is built: undici is then loaded only by a
  // server that sends something, and `serve` is ready sooner.
  const makeAgent = (options: { readonly pipelining?: number } = {}): Agent =>
    new Agent({
      connect: makePinnedConnector({
        resolver,
        policy,
        runtime,
        ca: settings.extraCa.length === 0 ? undefined : [...tls.getCACertificates("default"), ...settings.extraCa],
        connectTimeoutMs: timeoutMs
      }),
      // Our deadline governs; undici's own timers are only a backstop behind it.
      headersTimeout: timeoutMs + 1000,
      bodyTimeout: timeoutMs + 1000,
      maxResponseSize: MAX_BODY_BYTES,
      ...options
    })
  let agent: Agent | undefined
  const agentNow = (): Agent => agent ??= makeAgent()
  // For the second try after a stale connection: no keep-alive, so every request gets a connection of its own.
  let fresh: Agent | undefined
  const freshNow = (): Agent => fresh ??= makeAgent({ pipelining: 0 })
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() =>
      Effect.all([agent, fresh].flatMap((opened) => opened === undefined ? [] : [closeAgent(opened)]), { discard: true })
    )
  )

  // A refusal is a security event worth a warning (and a count); other failures are the caller's to log.
  const warnRefusal = (request: EgressRequest) => (error: EgressError) =>
    error._tag === "EgressRefused"
      ? Effect.logWarning(error.message).pipe(
        Effect.annotateLogs({ purpose: request.options?.purpose ?? "unspecified", reason: error.reason }),
        Effect.zipRight(Metric.increment(refusalsByReason[error.reason]))
      )
      : Effect.void

  // Each URL's check (parse, URL rules, a literal address against the policy) is kept: the answer
  // depends only on the URL and the policy, and deliveries go to the same few URLs again and again.
  // Bounded: emptied when full.
  const targets = new Map<string, Either.Either<PreparedTarget, EgressRefused>>()
  const targetOf = (request: EgressRequest) => {
    const allowQuery = request.options?.allowQuery ?? false
    const key = `${allowQuery ? "q" : "-"}${request.url}`
    const known = targets.get(key)
    if (known !== undefined) return known
    const target = prepareTarget(policy, request.url, allowQuery)
    if (targets.size >= MAX_TARGETS) targets.clear()
    targets.set(key, target)
    return target
  }

  // The second and last try of a request whose reused connection was closed under it, in what is
  // left of the first try's deadline. Nothing was answered, so the server did not act on it.
  const sendAgain = (request: PreparedRequest, startedNanos: bigint) => (stale: StaleConnection) => {
    const leftMs = timeoutMs - Number(clock.unsafeCurrentTimeNanos() - startedNanos) / 1e6
    if (leftMs <= 0) return Effect.fail(stale.error)
    return Effect.logDebug("Sending again on a fresh connection: the kept-alive one closed before answering").pipe(
      Effect.annotateLogs({ host: request.host, purpose: request.purpose, first_error: stale.error.message }),
      Effect.zipRight(exchange(freshNow(), request, deadlines, timeoutMs)),
      Effect.catchTag("StaleConnection", (again) => Effect.fail(again.error)),
      Effect.timeoutFail({ duration: leftMs, onTimeout: () => new EgressTimeout({ host: request.host, timeoutMs }) }),
      // On the clock the deadlines use (the Layer's), not the caller's: under a caller's TestClock the
      // second try would otherwise expire at the first clock jump, while its request is still on the wire.
      Effect.withClock(clock)
    )
  }

  // Deliberately lean (no span or log per exchange): on loopback a span alone costs about a
  // quarter of the exchange, and the caller's span (the bridge operation) already covers it.
  const send = (request: EgressRequest): Effect.Effect<EgressResponse, EgressError> => {
    const prepared = prepareRequest(policy, request, targetOf(request))
    if (Either.isLeft(prepared)) return Effect.tapError(Effect.fail(prepared.left), warnRefusal(request))
    const started = clock.unsafeCurrentTimeNanos()
    return exchange(agentNow(), prepared.right, deadlines, timeoutMs).pipe(
      Effect.catchTag("StaleConnection", sendAgain(prepared.right, started)),
      Effect.map((response): EgressResponse => ({
        ...response,
        durationMs: Number(clock.unsafeCurrentTimeNanos() - started) / 1e6
      })),
      Effect.tapError(warnRefusal(request))
    )
  }

  return Egress.of({ send })
})
