/**
 * What the broker destination kinds (RabbitMQ, NATS) share around their
 * publishers: one publisher (one connection) per destination target, kept
 * and reused, closed when its destination is removed, once unused for a
 * while (a disabled destination is published to no more) and with the
 * kind's Layer; the translation of publisher outcomes into the `Destination` interface's; and
 * `destination`, which makes a kind's service from what is its own.
 */
import { BrokerEgress } from "@crm-relay/bridge"
import type { Either, Schema } from "effect"
import { Clock, Duration, Effect, Exit, Option, Redacted, Schedule, Scope } from "effect"
import { createHash } from "node:crypto"
import { DestinationRefused, type DestinationService, make, type Message, Outcome, perTarget, type Target } from "../../Destination.js"
import type { BrokerMessage, CheckOutcome, PublisherOptions, PublishOutcome } from "./BrokerMessage.js"

/** How long a destination's connection stays open without a publish (default). */
export const DEFAULT_IDLE = Duration.minutes(5)

/** Publishers by target, each in a scope of its own. */
export interface Pool<P> {
  /** Runs `use` with the target's publisher, made (in its own scope) on first use. */
  readonly with: <A>(key: string, make: Effect.Effect<P, never, Scope.Scope>, use: (publisher: P) => Effect.Effect<A>) => Effect.Effect<A>
  /** Closes the publisher of `key` now, if there is one (a publish still running on it ends as the connection does). */
  readonly evict: (key: string) => Effect.Effect<void>
  /** How many publishers are open (tests). */
  readonly size: () => number
}

interface Entry<P> {
  readonly publisher: P
  readonly scope: Scope.CloseableScope
  usedAt: number
  inFlight: number
}

/**
 * A pool for the Layer's scope: idle publishers are closed every `idle / 2`, all of them with the scope.
 * Idleness is wall time: the sweep and the use stamps read the live clock, as the workers do, so a
 * TestClock moved by years in a test of something else does not replay millions of sweeps.
 */
export const pool = <P>(idle: Duration.Duration): Effect.Effect<Pool<P>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = Clock.make()
    const entries = new Map<string, Entry<P>>()
    const lock = yield* Effect.makeSemaphore(1)
    const closeEntry = (key: string, entry: Entry<P>) =>
      Effect.suspend(() => {
        entries.delete(key)
        return Scope.close(entry.scope, Exit.void)
      })
    yield* Effect.addFinalizer(() => Effect.forEach([...entries], ([key, entry]) => closeEntry(key, entry), { discard: true }))
    const idleMs = Duration.toMillis(idle)
    const sweep = Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      return Effect.forEach(
        [...entries].filter(([, entry]) => entry.inFlight === 0 && now - entry.usedAt >= idleMs),
        ([key, entry]) => closeEntry(key, entry),
        { discard: true }
      )
    })
    yield* Effect.forkScoped(
      Effect.repeat(sweep, Schedule.spaced(Duration.millis(Math.max(10, idleMs / 2)))).pipe(Effect.withClock(clock))
    )

    // Making a publisher does not connect (the first publish does), so the lock is held briefly.
    const entryOf = (key: string, make: Effect.Effect<P, never, Scope.Scope>) =>
      Effect.suspend(() => {
        const known = entries.get(key)
        if (known !== undefined) return Effect.succeed(known)
        return lock.withPermits(1)(Effect.suspend(() => {
          const again = entries.get(key)
          if (again !== undefined) return Effect.succeed(again)
          return Effect.flatMap(Scope.make(), (scope) =>
            Effect.map(Scope.extend(make, scope), (publisher) => {
              const entry: Entry<P> = { publisher, scope, usedAt: 0, inFlight: 0 }
              entries.set(key, entry)
              return entry
            }))
        }))
      })

    return {
      with: (key, make, use) =>
        Effect.flatMap(entryOf(key, make), (entry) => {
          entry.usedAt = clock.unsafeCurrentTimeMillis()
          entry.inFlight++
          return Effect.ensuring(use(entry.publisher), Effect.sync(() => entry.inFlight--))
        }),
      evict: (key) =>
        Effect.suspend(() => {
          const entry = entries.get(key)
          return entry === undefined ? Effect.void : closeEntry(key, entry)
        }),
      size: () => entries.size
    }
  })

/** The pool key of a target: its configuration and a digest of its credentials (never the credentials). */
export const keyOf = (target: Target): string =>
  `${JSON.stringify(target.config)}\n${
    Option.match(target.credentials, {
      onNone: () => "",
      onSome: (secret) => createHash("sha256").update(Redacted.value(secret)).digest("base64url")
    })
  }`

/** A delivery as a broker message: the signed JSON, the `webhook-id` as message id, the Standard Webhooks headers. */
export const brokerMessage = (message: Message): BrokerMessage => {
  // The user agent names the HTTP client; it is no header of a message.
  const { "user-agent": _userAgent, ...headers } = message.headers
  return { body: Buffer.from(message.body), messageId: message.id, headers }
}

const transientClass = (reason: string): string =>
  /within|in time|did not answer|did not complete/i.test(reason)
    ? "timeout"
    : /refused the user|credentials|virtual host/i.test(reason)
    ? "auth"
    : /ECONNREFUSED|lost|closed|could not be resolved|ENODATA/i.test(reason)
    ? "network"
    : "broker_error"

const permanentClass = (reason: string): string =>
  /could not route/i.test(reason)
    ? "unroutable"
    : /no JetStream stream|does not exist|NOT_FOUND|no exchange/i.test(reason)
    ? "missing"
    : "refused"

/** A publisher's outcome as the interface's: the reason is the attempt's error sentence; brokers have no status code. */
export const outcomeOf = (outcome: PublishOutcome): Outcome => {
  switch (outcome._tag) {
    case "Delivered":
      return Outcome.Delivered({ statusCode: null })
    case "Transient":
      return Outcome.Transient({ errorClass: transientClass(outcome.reason), error: outcome.reason, statusCode: null })
    case "Permanent":
      return Outcome.Permanent({ errorClass: permanentClass(outcome.reason), error: outcome.reason, statusCode: null })
  }
}

/** A check's refusal as the interface's typed error. */
export const checked = (outcome: CheckOutcome): Effect.Effect<void, DestinationRefused> => {
  if (outcome._tag === "Ok") return Effect.void
  const message = outcome.reason
  const reason = /does not exist|No JetStream stream|captured by the stream/i.test(message)
    ? "missing"
    : /refused the user|credentials|virtual host/i.test(message)
    ? "auth"
    : /private|loopback|metadata|EGRESS_ALLOW_PRIVATE|not allowed|must be/i.test(message)
    ? "refused"
    : "unreachable"
  return Effect.fail(new DestinationRefused({ reason, message }))
}

/** Credentials that do not decode: refused at check, Permanent at publish (the stored row cannot change). */
export const badCredentials = (kind: string, expected: string): DestinationRefused =>
  new DestinationRefused({ reason: "invalid_config", message: `The ${kind} destination's credentials must be ${expected}.` })

/** Settings of a broker kind (tests shorten or lengthen them). */
export interface Options extends PublisherOptions {
  /** How long a destination's connection stays open without a publish. Default 5 minutes. */
  readonly idle?: Duration.DurationInput
}

/** What is a broker kind's own: its name, its configuration, its credentials and the publisher it opens. */
export interface Kind<C, K, P extends { readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome> }> {
  readonly kind: string
  /** The configuration Schema (from `@crm-relay/contract/Destinations`): stored JSON → `C`. */
  readonly config: Schema.Schema<C, any>
  /** The unsealed credentials decoded, or the refusal (`badCredentials`) if they do not decode. */
  readonly credentialsOf: (credentials: Option.Option<Redacted.Redacted<string>>) => Either.Either<K, DestinationRefused>
  /** Makes the target's publisher (connecting on first publish), closed with the scope. */
  readonly open: (config: C, credentials: K, options: PublisherOptions) => Effect.Effect<P, never, BrokerEgress | Scope.Scope>
  /** Checks a target before it is stored. */
  readonly check: (config: C, credentials: K, options: PublisherOptions) => Effect.Effect<CheckOutcome, never, BrokerEgress>
}

/** A broker kind's `Destination` service over the context's BrokerEgress; its connections close with the scope. */
export const destination = <C, K, P extends { readonly publish: (message: BrokerMessage) => Effect.Effect<PublishOutcome> }>(
  kind: Kind<C, K, P>,
  options: Options = {}
): Effect.Effect<DestinationService, never, BrokerEgress | Scope.Scope> =>
  Effect.gen(function*() {
    // BrokerEgress alone, not the Layer's whole context: that holds the Layer's Scope, which would
    // take the publishers' finalizers from the scopes the pool closes them with.
    const egress = yield* BrokerEgress
    const publishers = yield* pool<P>(Duration.decode(options.idle ?? DEFAULT_IDLE))
    // Once per target, not per message: the credentials' JSON and Schema, and the key's digest.
    const credentialsOf = perTarget((target) => kind.credentialsOf(target.credentials))
    const key = perTarget(keyOf)
    return make<C>({
      kind: kind.kind,
      config: kind.config,
      publish: (message, config) => {
        const credentials = credentialsOf(message.target)
        if (credentials._tag === "Left") {
          return Effect.succeed(outcomeOf({ _tag: "Permanent", reason: credentials.left.message }))
        }
        return publishers.with(
          key(message.target),
          Effect.provideService(kind.open(config, credentials.right, options), BrokerEgress, egress),
          (publisher) => Effect.map(publisher.publish(brokerMessage(message)), outcomeOf)
        )
      },
      check: (target, config) => {
        const credentials = credentialsOf(target)
        return credentials._tag === "Left"
          ? Effect.fail(credentials.left)
          : kind.check(config, credentials.right, options).pipe(Effect.provideService(BrokerEgress, egress), Effect.flatMap(checked))
      },
      // The removed destination's connection closes now rather than after `idle`. Two destinations
      // with the same target and credentials share it: the other one reconnects on its next publish.
      release: (target) => publishers.evict(key(target))
    })
  })
