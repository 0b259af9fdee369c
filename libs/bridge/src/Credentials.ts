/**
 * The credential of one connection. API key and OAuth client credentials are
 * two Layers of this tag; each decides what a bridge 401 means (Authentication
 * rule 3: an API-key 401 is never replayed; OAuth gets one fresh grant and one
 * replay).
 */
import type { Effect, Redacted } from "effect"
import { Context } from "effect"
import type { Operations } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"

/** Runs `send` with a Bearer credential, applying the kind's 401 policy. */
export class Credentials extends Context.Tag("@crm-relay/bridge/Credentials")<
  Credentials,
  {
    /** `api_key` or `oauth`. */
    readonly kind: string
    readonly authorize: <A>(
      operation: Operations.OperationName,
      send: (bearer: Redacted.Redacted<string>) => Effect.Effect<A, BridgeError>
    ) => Effect.Effect<A, BridgeError>
  }
>() {}
