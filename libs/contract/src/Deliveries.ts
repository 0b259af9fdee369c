/**
 * Webhook deliveries as the internal API lists them: states, attempt
 * results (a module the CLI can load without the delivery store).
 */
import { Schema } from "effect"

/** A delivery's state. */
export const DeliveryStatus = Schema.Literal("pending", "delivered", "failed", "ended").annotations({ identifier: "DeliveryStatus" })
export type DeliveryStatus = typeof DeliveryStatus.Type

/** What became of one attempt. */
/**
 * A pending delivery held with its receiver origin (or broker host), which has been failing since
 * `failing_since`: nothing is sent to it but one probe at `next_try_at`; when the origin answers,
 * everything held for it is delivered at once.
 */
export const HeldDelivery = Schema.Struct({
  failing_since: Schema.String,
  next_try_at: Schema.String
}).annotations({ identifier: "HeldDelivery" })
export type HeldDelivery = typeof HeldDelivery.Type

/** The sentence every surface shows for a held delivery; `time` writes its instants (ISO as they are by default). */
export const heldSentence = (held: HeldDelivery, time: (iso: string) => string = (iso) => iso): string =>
  `held: the receiver has been failing since ${time(held.failing_since)}, next try at ${time(held.next_try_at)}`

export const AttemptResult = Schema.Literal("delivered", "retry", "failed", "ended")
export type AttemptResult = typeof AttemptResult.Type
