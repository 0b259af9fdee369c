/**
 * What a broker publisher is given and what it answers, kept free of any
 * destination interface so the publishers can be wrapped as destination
 * Layers without knowing them.
 */
import { Data, Effect } from "effect"

/** One delivery as a broker message: the event's JSON and the Standard Webhooks headers. */
export interface BrokerMessage {
  /** The bytes of the event JSON, exactly as a webhook POST would carry them. */
  readonly body: Uint8Array
  /** The `webhook-id`: the message id brokers deduplicate and consumers key on. */
  readonly messageId: string
  /** `webhook-id`, `webhook-timestamp`, `webhook-signature` and `content-type`, names lower-case. */
  readonly headers: Readonly<Record<string, string>>
}

/** How one publish ended: delivered, worth retrying on the schedule, or never going to work (with a sentence why). */
export type PublishOutcome = Data.TaggedEnum<{
  Delivered: {}
  Transient: { readonly reason: string }
  Permanent: { readonly reason: string }
}>
/** Constructors and matchers of `PublishOutcome`. */
export const PublishOutcome = Data.taggedEnum<PublishOutcome>()

/** What checking a destination at creation found: usable, or refused with one sentence. */
export type CheckOutcome = Data.TaggedEnum<{
  Ok: {}
  Refused: { readonly reason: string }
}>
/** Constructors and matchers of `CheckOutcome`. */
export const CheckOutcome = Data.taggedEnum<CheckOutcome>()

/** Options shared by the publishers. */
export interface PublisherOptions {
  /** Bound on connecting and on waiting for the broker's receipt (default 10 s, as for webhooks). */
  readonly timeoutMs?: number
  /** Extra trusted CA certificates (PEM) for TLS, on top of Node's store (tests). */
  readonly extraCa?: ReadonlyArray<string>
}

/** The default bound on connecting and on one receipt. */
export const DEFAULT_TIMEOUT_MS = 10_000

/** A one-line reason from an unknown failure (broker clients throw plain Errors). */
export const describeError = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  return (text.split("\n")[0] ?? "").trim().replace(/\.$/, "")
}

/** `text` as one sentence: a capital first letter and one closing full stop. */
export const sentence = (text: string): string => {
  const trimmed = text.trim().replace(/\.+$/, "")
  return `${trimmed.charAt(0).toUpperCase()}${trimmed.slice(1)}.`
}

/** The outcome with its reason written as one sentence. */
export const asSentence = (outcome: PublishOutcome): PublishOutcome =>
  outcome._tag === "Delivered"
    ? outcome
    : outcome._tag === "Transient"
    ? PublishOutcome.Transient({ reason: sentence(outcome.reason) })
    : PublishOutcome.Permanent({ reason: sentence(outcome.reason) })

/**
 * A publisher's `publish` from its two own parts: the open (or reopened) connection, whose
 * failure is the outcome, and the publish on it; the reason comes out as one sentence.
 */
export const publishVia = <S>(
  connection: Effect.Effect<S, PublishOutcome>,
  publishOn: (state: S, message: BrokerMessage) => Effect.Effect<PublishOutcome>
) =>
(message: BrokerMessage): Effect.Effect<PublishOutcome> =>
  connection.pipe(
    Effect.flatMap((state) => publishOn(state, message)),
    Effect.merge,
    Effect.map(asSentence)
  )

/**
 * A publisher's (re)connect step, run by one publish at a time: `attempt` (which returns the open
 * connection when there is one, else connects) is shared with the publishes waiting on it, its
 * failure included. A publish that waited while an attempt failed gets that failure rather than
 * trying again: a broker that never answers costs each waiting publish one timeout, not one per
 * publish queued before it (which would outlast the delivery's lease).
 */
export const connectOnce = <S>(attempt: Effect.Effect<S, PublishOutcome>): Effect.Effect<Effect.Effect<S, PublishOutcome>> =>
  Effect.map(Effect.makeSemaphore(1), (lock) => {
    let ended = 0
    let failure: PublishOutcome | undefined
    return Effect.suspend(() => {
      const seen = ended
      return lock.withPermits(1)(Effect.suspend(() => {
        if (ended !== seen && failure !== undefined) return Effect.fail(failure)
        failure = undefined
        return attempt.pipe(
          Effect.tapError((outcome) => Effect.sync(() => void (failure = outcome))),
          Effect.ensuring(Effect.sync(() => void ended++))
        )
      }))
    })
  })
