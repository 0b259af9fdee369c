/**
 * Webhook deliveries as the internal API lists them: states, attempt
 * results (a module the CLI can load without the delivery store).
 */
import { Schema } from "effect"

/** A delivery's state. */
export const DeliveryStatus = Schema.Literal("pending", "delivered", "failed", "ended").annotations({ identifier: "DeliveryStatus" })
export type DeliveryStatus = typeof DeliveryStatus.Type

/** What became of one attempt. */
export const AttemptResult = Schema.Literal("delivered", "retry", "failed", "ended")
export type AttemptResult = typeof AttemptResult.Type
