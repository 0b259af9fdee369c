/**
 * The in-process control surface of a running reference bridge: set and
 * clear faults, read what the bridge received, stored and granted, reset.
 */
import { Context, Effect, Layer } from "effect"
import { BridgeStore } from "./BridgeStore.js"
import type { StoredRecords } from "./BridgeStore.js"
import { Credentials } from "./Credentials.js"
import type { TokenGrant } from "./Credentials.js"
import { FaultBook } from "./FaultBook.js"
import type { Fault, FaultOperation, Transport } from "./Faults.js"
import { FaultRule, rule } from "./Faults.js"
import { Recorder } from "./Recorder.js"
import type { ReceivedRequest } from "./Recorder.js"

/** Which requests a fault set with {@link BridgeControl.setFault} hits, and how often. */
export interface FaultTarget {
  readonly operation?: FaultOperation
  readonly transport?: Transport
  readonly times?: number | "always"
}

/** Control of a running bridge. Every member is an Effect, run it to act. */
export interface BridgeControl {
  /**
   * Adds a fault rule: either a ready `FaultRule`, or a fault and its target
   * (default: the next one request on REST or MCP, any operation).
   */
  readonly setFault: (fault: Fault | FaultRule, target?: FaultTarget) => Effect.Effect<void>
  /** Adds several rules, tried in order. */
  readonly setFaults: (rules: ReadonlyArray<FaultRule>) => Effect.Effect<void>
  /** Drops every pending fault. */
  readonly clearFaults: Effect.Effect<void>
  /** Pending rules and the uses they have left. */
  readonly pendingFaults: Effect.Effect<ReadonlyArray<{ readonly rule: FaultRule; readonly remaining: number | "always" }>>
  /** Every request received so far, in arrival order (the control endpoint's own requests excluded). */
  readonly received: Effect.Effect<ReadonlyArray<ReceivedRequest>>
  /** Everything stored: contacts, leads, appointments and the idempotency mapping. */
  readonly records: Effect.Effect<StoredRecords>
  /** Every OAuth grant so far, oldest first. */
  readonly grants: Effect.Effect<ReadonlyArray<TokenGrant>>
  /** Invalidates every access token granted so far: their next use answers 401. */
  readonly revokeTokens: Effect.Effect<void>
  /** Clears faults, the received log, grants and tokens, and every stored record. */
  readonly reset: Effect.Effect<void>
}

/** The control service of a running bridge. */
export class BridgeControlService extends Context.Tag("@crm-relay/reference-bridge/BridgeControl")<
  BridgeControlService,
  BridgeControl
>() {}

/** Builds the control surface over the bridge's services. */
export const make: Effect.Effect<BridgeControl, never, FaultBook | Recorder | BridgeStore | Credentials> = Effect.gen(
  function*() {
    const faults = yield* FaultBook
    const recorder = yield* Recorder
    const store = yield* BridgeStore
    const credentials = yield* Credentials
    return {
      setFault: (fault, target = {}) => faults.add(fault instanceof FaultRule ? fault : rule(fault, target)),
      setFaults: (rules) => faults.add(rules),
      clearFaults: faults.clear,
      pendingFaults: faults.pending,
      received: recorder.received,
      records: store.records,
      grants: credentials.grants,
      revokeTokens: credentials.revokeTokens,
      reset: Effect.all([faults.clear, recorder.clear, credentials.reset, store.reset], { discard: true })
    }
  }
)

/** The control service, over the bridge's services. */
export const layer: Layer.Layer<BridgeControlService, never, FaultBook | Recorder | BridgeStore | Credentials> = Layer
  .effect(BridgeControlService, make)
