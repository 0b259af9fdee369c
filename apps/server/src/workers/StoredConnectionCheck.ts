/**
 * The bridge conformance check on a tenant's stored connection: the one path
 * the internal API, the CLI (direct mode) and the Integrations area share.
 */
import { Conformance, type Egress, type InvalidConnection, type TokenCache, type TransportRegistry } from "@crm-relay/bridge"
import { Connections } from "@crm-relay/calls"
import type { Conformance as Contract } from "@crm-relay/contract"
import { Effect, Option } from "effect"

/** Why the stored connection could not be checked (a failing bridge is a report, never an error). */
export type Refusal = Connections.AccountNotFound | Connections.ConnectionNotFound | InvalidConnection

/** Loads the stored connection of `tenantId` in `accountId` and runs the check on it (read-only unless `writes`). */
export const run = (
  connections: Connections.Connections,
  accountId: string,
  tenantId: string,
  writes: boolean
): Effect.Effect<Contract.Report, Refusal, Egress | TokenCache | TransportRegistry> =>
  Effect.gen(function*() {
    const state = yield* connections.state(accountId, tenantId)
    if (Option.isNone(state)) return yield* new Connections.AccountNotFound({ accountId })
    if (Option.isNone(state.value.connection)) return yield* new Connections.ConnectionNotFound({ accountId, tenantId })
    return yield* Conformance.run({ connection: state.value.connection.value.connection, writes })
  }).pipe(Effect.withSpan("StoredConnectionCheck.run"))
