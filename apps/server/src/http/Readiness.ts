/**
 * Whether this server should get traffic, for `GET /readyz`: `starting` until
 * every listener of its role is up (the internal API comes up first, the
 * public and portal ports after it), `serving` then, and `stopping` from the
 * moment a stop begins, while in-flight requests drain — so a load balancer
 * sends nothing to a replica that cannot take it yet, or no longer.
 */
import { Effect, Ref } from "effect"

/** Where the server is in its life. */
export type Phase = "starting" | "serving" | "stopping"

/** The server's phase; `serving` is set once all listeners are up, `stopping` when the stop begins. */
export class Readiness extends Effect.Service<Readiness>()("@crm-relay/server/Readiness", {
  effect: Effect.map(Ref.make<Phase>("starting"), (phase) => ({
    phase: Ref.get(phase),
    serving: Ref.set(phase, "serving"),
    stopping: Ref.set(phase, "stopping")
  }))
}) {}
