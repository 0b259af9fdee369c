/**
 * The answer of a replay of a stopped CRM push job or webhook delivery.
 */
import { Schema } from "effect"

/** POST /v1/crm-pushes/{id}/replay and POST /v1/deliveries/{id}/replay answer. */
export const ReplayAnswer = Schema.Struct({
  id: Schema.String,
  /** `queued`: pending again, due now; `already_pending`: it was waiting or running, left as it is. */
  outcome: Schema.Literal("queued", "already_pending")
}).annotations({ identifier: "ReplayAnswer" })
export type ReplayAnswer = typeof ReplayAnswer.Type
