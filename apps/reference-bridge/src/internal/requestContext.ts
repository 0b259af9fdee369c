/**
 * What the front of the server learned about the request being handled, for
 * the transport code deeper down: its route, the fault it consumed, and who
 * authenticated. Carried in a FiberRef because HttpApi handlers are built
 * once and cannot take per-request services.
 */
import { Effect, FiberRef, Option } from "effect"
import type { Principal } from "../Credentials.js"
import type { Fault, Route } from "../Faults.js"

/** Per-request state. `principal` is filled in by authentication. */
export interface RequestState {
  readonly route: Route
  readonly fault: Option.Option<Fault>
  principal: Principal | undefined
}

/** The state of the request this fiber is handling, if any. */
export const currentRequest: FiberRef.FiberRef<RequestState | undefined> = FiberRef.unsafeMake<RequestState | undefined>(
  undefined
)

/** The fault the current request consumed. */
export const currentFault: Effect.Effect<Option.Option<Fault>> = Effect.map(
  FiberRef.get(currentRequest),
  (state) => state?.fault ?? Option.none()
)

/** Notes who authenticated the current request, for the received-request log. */
export const notePrincipal = (principal: Principal): Effect.Effect<void> =>
  Effect.map(FiberRef.get(currentRequest), (state) => {
    if (state !== undefined) state.principal = principal
  })
