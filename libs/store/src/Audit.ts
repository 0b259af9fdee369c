/**
 * Who acts, and the audit trail of what they change. An entry point (the
 * internal API, the Event API, a CLI command) runs its work `actingAs` an
 * actor; the services that change accounts, keys, connections,
 * subscriptions, jobs or keys at rest `record` one audit line each, naming
 * that actor. Work outside any entry point (the workers) acts as `system`.
 */
import { Effect, FiberRef, Logger, LogLevel, Option } from "effect"
import { globalValue } from "effect/GlobalValue"

/** Who acts, and for which account once known; one per request or command, filled in as it is learned. */
export interface Acting {
  /** `admin_token`, `integration_key:<id>`, `cli` or `system`. */
  actor: string
  accountId: string | undefined
}

const current = globalValue(Symbol.for("@crm-relay/store/Audit/current"), () => FiberRef.unsafeMake<Acting | undefined>(undefined))

/** Runs `effect` on behalf of `acting` (the caller's own record, so it can read what the work learned). */
export const actingAs = (acting: Acting) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, current, acting)

/**
 * The rest of this fiber acts on behalf of `acting` (set, not restored): for a fiber that serves one
 * request alone and ends with it, where `actingAs`'s restore would be work for nothing.
 */
export const actAs = (acting: Acting): Effect.Effect<void> => FiberRef.set(current, acting)

/** Who acts here, if an entry point said so. */
export const acting: Effect.Effect<Option.Option<Acting>> = Effect.map(FiberRef.get(current), Option.fromNullable)

/** Names the actor and account of the current request, once authenticated (no-op outside an entry point). */
export const identify = (actor: string, accountId: string): Effect.Effect<void> =>
  FiberRef.getWith(current, (acting) =>
    Effect.sync(() => {
      if (acting === undefined) return
      acting.actor = actor
      acting.accountId = accountId
    }))

/** Audit fields: ids and names, never a secret. */
export type Fields = Readonly<Record<string, string | number | boolean | undefined>>

/**
 * One audit line: `log: "audit"`, the `action` (e.g. `account.created`), the
 * `actor`, and `fields`. Logged at Info, in the caller's span, whatever the
 * minimum level (LOG_LEVEL=Warning quiets the log, not the record of changes);
 * only LOG_LEVEL=None silences it.
 */
export const record = (action: string, fields: Fields = {}): Effect.Effect<void> =>
  FiberRef.getWith(current, (acting) => {
    const annotations: Record<string, unknown> = { log: "audit", action, actor: acting?.actor ?? "system" }
    for (const [key, value] of Object.entries(fields)) if (value !== undefined) annotations[key] = value
    const line = Effect.annotateLogs(Effect.logInfo(`audit: ${action}`), annotations)
    return FiberRef.getWith(FiberRef.currentMinimumLogLevel, (minimum) =>
      LogLevel.greaterThan(minimum, LogLevel.Fatal) ? Effect.void : Logger.withMinimumLogLevel(line, LogLevel.Info))
  })
