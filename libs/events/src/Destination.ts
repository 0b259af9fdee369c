/**
 * Where a delivery goes: one interface, one Layer per kind (the HTTPS
 * webhook, a RabbitMQ exchange, a NATS JetStream subject…). The delivery
 * worker owns everything the kinds share — the queue and its fair share,
 * signing, the retry schedule, the receiver lifecycle, the attempt log,
 * metrics and spans — and asks the kind only to publish ONE message and say
 * how it went. A new kind is a new file exporting a Layer of this tag
 * (registered with `DestinationKinds.register`), not an edit to the worker.
 */
import { Context, Data, Duration, Effect, Either, type Option, ParseResult, type Redacted, Schema } from "effect"

/** Where one message goes: the kind's configuration as stored, and its unsealed credentials. */
export interface Target {
  /** The kind's configuration as stored (JSON); the kind decodes it with its Schema. Webhook: `{ url }`. */
  readonly config: unknown
  /** The credentials unsealed from the Vault (the kind's own JSON text), if the destination has any. */
  readonly credentials: Option.Option<Redacted.Redacted<string>>
}

/** One delivery attempt of one event, as every kind receives it. */
export interface Message {
  /** The delivery id: the `webhook-id`, and the message id a broker deduplicates on; the same on every redelivery. */
  readonly id: string
  readonly accountId: string
  /** The event's JSON: exactly the bytes signed. */
  readonly body: string
  /**
   * The Standard Webhooks headers of this attempt (`webhook-id`, `webhook-timestamp`,
   * `webhook-signature`, with `content-type` and `user-agent`): HTTP headers for a
   * webhook, message headers for a broker.
   */
  readonly headers: Readonly<Record<string, string>>
  readonly target: Target
}

/** Fields every unsuccessful outcome carries, as stored in the attempt log. */
interface Failure {
  /** A short machine word (`server_error`, `timeout`, `unroutable`…), stored as `delivery_attempts.error_class`. */
  readonly errorClass: string
  /** One short sentence for the operator: no path, query, payload, secret or text of the remote's headers. */
  readonly error: string
  /** The remote's status code where it has one (HTTP); null for brokers. */
  readonly statusCode: number | null
  /** How long the attempt took by the kind's own measure; the worker measures when absent. */
  readonly durationMs?: number | undefined
}

/** How one publish ended. */
export type Outcome = Data.TaggedEnum<{
  /** The destination accepted the message (a 2xx, a publisher confirm, a JetStream ack). */
  Delivered: { readonly statusCode: number | null; readonly durationMs?: number | undefined }
  /** Worth another try on the delivery schedule; `retryAfter` is the least wait the remote asked for. */
  Transient: Failure & {
    readonly retryAfter?: Duration.Duration | undefined
    /** What the remote itself asked for (a `Retry-After`), apart from the schedule's own least waits; zero when nothing. */
    readonly asked?: Duration.Duration | undefined
  }
  /** Retrying cannot help (refused address, invalid configuration, unroutable by design): fails now. */
  Permanent: Failure
  /**
   * The remote ended the message, not as a failure: `aborted` (this message only) or `gone`
   * (the target asked to be removed: a webhook's 410). Counts toward no failure clock.
   */
  Ended: Failure & { readonly reason: "gone" | "aborted" }
}>

/** Constructors and matchers of `Outcome`. */
export const Outcome = Data.taggedEnum<Outcome>()

/** A destination refused at creation or by its check: one sentence saying why, safe to show. */
export class DestinationRefused extends Data.TaggedError("DestinationRefused")<{
  /** `invalid_config`, `unreachable`, `auth`, `missing` (exchange or stream), `refused` (egress rules)… */
  readonly reason: string
  readonly message: string
}> {}

/** What a kind implements. */
export interface DestinationService {
  /** The kind's name as stored and typed by users: `webhook`, `rabbitmq`, `nats`. */
  readonly kind: string
  /** Publishes one message; never fails: every failure is an `Outcome`. */
  readonly publish: (message: Message) => Effect.Effect<Outcome>
  /**
   * Connects and checks the target without publishing (credentials, the exchange or the
   * stream exists, the address passes egress); run when a destination is created.
   */
  readonly check: (target: Target) => Effect.Effect<void, DestinationRefused>
  /**
   * Ends whatever the kind holds for the target (a broker connection kept between publishes):
   * run by the delivery worker of every replica when its destination is removed (DestinationRemovals),
   * so nothing of it stays open until some idle timeout.
   */
  readonly release: (target: Target) => Effect.Effect<void>
}

/** One destination kind. Several kinds live side by side in `DestinationKinds`. */
export class Destination extends Context.Tag("@crm-relay/events/Destination")<Destination, DestinationService>() {}

/** A kind written against its decoded configuration (`make` decodes the stored JSON once per message). */
export interface TypedDestination<C> {
  readonly kind: string
  /** The configuration Schema (from `@crm-relay/contract/Destinations`): stored JSON → `C`. */
  readonly config: Schema.Schema<C, any>
  readonly publish: (message: Message, config: C) => Effect.Effect<Outcome>
  readonly check: (target: Target, config: C) => Effect.Effect<void, DestinationRefused>
  /** Ends what the kind holds for the target; a kind that keeps nothing between publishes leaves it out. */
  readonly release?: ((target: Target) => Effect.Effect<void>) | undefined
}

/**
 * `f` of a target, computed once per `Target` object: what a kind derives from the stored row
 * (its decoded configuration, credentials, a connection key) is the same for every message to it.
 * Keyed weakly, so a target let go of (a destination removed, a REST hook's per-job target) is too.
 */
export const perTarget = <A>(f: (target: Target) => A): (target: Target) => A => {
  const known = new WeakMap<Target, A>()
  return (target) => {
    if (known.has(target)) return known.get(target) as A
    const value = f(target)
    known.set(target, value)
    return value
  }
}

// The first issue, named by its field: the tree's first line names only the Schema, not what is wrong.
const invalidConfig = (kind: string, error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  const field = issue === undefined || issue.path.length === 0 ? "" : issue.path.map(String).join(".")
  const what = issue === undefined ? "it does not decode" : field === "" ? issue.message : /^[a-z]/.test(issue.message)
    ? `${field} ${issue.message}`
    : `${field}: ${issue.message}`
  return `The ${kind} destination's configuration is not valid: ${what.replace(/\.$/, "")}.`
}

/**
 * A `DestinationService` from a kind written against its decoded configuration: a stored
 * configuration that no longer decodes is a Permanent `invalid_config` outcome (and a refusal
 * at check), never a defect.
 */
export const make = <C>(typed: TypedDestination<C>): DestinationService => {
  // Compiled once, and run once per target: the delivery worker keeps a destination's Target for
  // as long as the destination lives, so its messages reuse the decoded configuration.
  const decode = perTarget((target) => Schema.decodeUnknownEither(typed.config)(target.config))
  return {
    kind: typed.kind,
    publish: (message) => {
      const config = decode(message.target)
      return Either.isRight(config)
        ? typed.publish(message, config.right)
        : Effect.succeed(Outcome.Permanent({
          errorClass: "invalid_config",
          error: invalidConfig(typed.kind, config.left),
          statusCode: null
        }))
    },
    check: (target) => {
      const config = decode(target)
      return Either.isRight(config)
        ? typed.check(target, config.right)
        : Effect.fail(new DestinationRefused({ reason: "invalid_config", message: invalidConfig(typed.kind, config.left) }))
    },
    release: typed.release ?? (() => Effect.void)
  }
}

/** The least wait a Transient outcome asks for (zero: the schedule alone decides). */
export const waitOf = (outcome: Outcome & { readonly _tag: "Transient" }): Duration.Duration =>
  outcome.retryAfter ?? Duration.zero
