/**
 * The log of requests the bridge received, so tests can assert what a
 * client sent: transport, operation, tenant, headers (the Idempotency-Key
 * among them), body, and what was answered.
 */
import { Context, Effect, Layer, Ref } from "effect"
import type { Principal } from "./Credentials.js"
import type { Fault, FaultOperation, Transport } from "./Faults.js"

/** One request as the bridge received it. */
export interface ReceivedRequest {
  /** 1 for the first request, in arrival order. */
  readonly seq: number
  /** Arrival time, ISO 8601 UTC. */
  readonly at: string
  readonly transport: Transport
  /** The operation (from the REST path or the MCP tool name), when recognised. */
  readonly operation: FaultOperation | undefined
  readonly method: string
  readonly path: string
  /** Request headers with lower-case names; `authorization` is left out (see `authorizationScheme`). */
  readonly headers: Readonly<Record<string, string>>
  /** The scheme of the Authorization header (`Bearer`, `Basic`), without the credential. */
  readonly authorizationScheme: string | undefined
  /** The `Idempotency-Key` header, when sent. */
  readonly idempotencyKey: string | undefined
  /** The body: parsed JSON or form fields when possible, else the raw text. */
  readonly body: unknown
  /** Who authenticated, when authentication succeeded: tenant, credential kind, OAuth client and grant. */
  readonly principal: Principal | undefined
  /** The tenant of the principal (shortcut for `principal?.tenantId`). */
  readonly tenantId: string | undefined
  /** The answered HTTP status; `"lost"` when the socket was destroyed instead; `"interrupted"` when the client left. */
  readonly status: number | "lost" | "interrupted"
  /** The fault this request consumed, if any. */
  readonly fault: Fault | undefined
}

/** The received-request log. */
export class Recorder extends Context.Tag("@crm-relay/reference-bridge/Recorder")<Recorder, {
  /** Reserves the next sequence number (at arrival). */
  readonly nextSeq: Effect.Effect<number>
  /** Adds a finished request. */
  readonly add: (request: ReceivedRequest) => Effect.Effect<void>
  /** Every request so far, in arrival order. */
  readonly received: Effect.Effect<ReadonlyArray<ReceivedRequest>>
  /** Empties the log (sequence numbers keep counting). */
  readonly clear: Effect.Effect<void>
}>() {}

/** An empty log. */
export const make: Effect.Effect<Recorder["Type"]> = Effect.gen(function*() {
  const seq = yield* Ref.make(0)
  const log = yield* Ref.make<ReadonlyArray<ReceivedRequest>>([])
  return Recorder.of({
    nextSeq: Ref.updateAndGet(seq, (n) => n + 1),
    add: (request) => Ref.update(log, (entries) => [...entries, request].sort((a, b) => a.seq - b.seq)),
    received: Ref.get(log),
    clear: Ref.set(log, [])
  })
})

/** The received-request log. */
export const layer: Layer.Layer<Recorder> = Layer.effect(Recorder, make)
