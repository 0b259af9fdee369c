/** Record ids and timestamps of the reference CRM. */
import { Clock, Effect } from "effect"
import { randomBytes } from "node:crypto"

/** A fresh opaque record id such as `ct_3f2a0c4b9d8e7f6a5b4c3d2e`. */
export const newId = (prefix: string): Effect.Effect<string> =>
  Effect.sync(() => `${prefix}_${randomBytes(12).toString("hex")}`)

/** The current time as an ISO 8601 UTC string. */
export const nowIso: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())
