/**
 * How one svc.crm.v1 operation reaches a bridge. REST and MCP are two Layers
 * of this tag; a new transport is one new Layer (and one registry entry, see
 * TransportRegistry).
 */
import type { Effect, Redacted } from "effect"
import { Context } from "effect"
import type { Operations, Values } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"

/** One exchange: the operation, its REST request object, the write key and the Bearer credential. */
export interface TransportRequest {
  readonly operation: Operations.OperationName
  /** The REST request body fields, already encoded by the operation's contract Schema. */
  readonly body: Readonly<Record<string, unknown>>
  /** The write idempotency key; present exactly on the three write operations. */
  readonly idempotencyKey: Values.IdempotencyKey | undefined
  /** The API key or access token sent as `Authorization: Bearer`. */
  readonly bearer: Redacted.Redacted<string>
}

/** A transport's answer: the untrusted receipt object, and the HTTP status it came with. */
export interface TransportAnswer {
  readonly status: number
  /** The REST response object or MCP `structuredContent`; checked by Receipts, never trusted here. */
  readonly receipt: unknown
}

/** Sends one operation and classifies the answer into a receipt candidate or a BridgeError. */
export class BridgeTransport extends Context.Tag("@crm-relay/bridge/BridgeTransport")<
  BridgeTransport,
  {
    /** The registry kind of this transport (`rest`, `mcp`). */
    readonly kind: string
    readonly send: (request: TransportRequest) => Effect.Effect<TransportAnswer, BridgeError>
  }
>() {}
