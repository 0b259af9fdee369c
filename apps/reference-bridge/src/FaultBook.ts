/**
 * The pending fault rules of a running bridge. Each request consumes at most
 * one use of the first rule that matches it, atomically, so "the next two
 * calls" means exactly two even under concurrent requests.
 */
import { Context, Effect, Layer, Option, Ref } from "effect"
import type { Fault, FaultRule, Route } from "./Faults.js"
import { matches } from "./Faults.js"

interface Pending {
  readonly rule: FaultRule
  readonly remaining: number | "always"
}

/** The fault rules service. */
export class FaultBook extends Context.Tag("@crm-relay/reference-bridge/FaultBook")<FaultBook, {
  /** Appends rules; they are tried in the order they were added. */
  readonly add: (rules: FaultRule | ReadonlyArray<FaultRule>) => Effect.Effect<void>
  /** Drops every pending rule. */
  readonly clear: Effect.Effect<void>
  /** The rules that still have uses left, with those uses. */
  readonly pending: Effect.Effect<ReadonlyArray<{ readonly rule: FaultRule; readonly remaining: number | "always" }>>
  /** Consumes one use of the first rule matching `route`, returning its fault. */
  readonly consume: (route: Route) => Effect.Effect<Option.Option<Fault>>
}>() {}

/** A fault book holding `initial` rules. */
export const make = (initial: ReadonlyArray<FaultRule> = []): Effect.Effect<FaultBook["Type"]> =>
  Effect.gen(function*() {
    const toPending = (rule: FaultRule): Pending => ({ rule, remaining: rule.times ?? 1 })
    const state = yield* Ref.make<ReadonlyArray<Pending>>(initial.map(toPending))
    return FaultBook.of({
      add: (rules) =>
        Ref.update(state, (pending) => [...pending, ...(Array.isArray(rules) ? rules : [rules]).map(toPending)]),
      clear: Ref.set(state, []),
      pending: Ref.get(state),
      consume: (route) =>
        Ref.modify(state, (pending): [Option.Option<Fault>, ReadonlyArray<Pending>] => {
          const index = pending.findIndex((p) => matches(p.rule, route))
          const hit = pending[index]
          if (hit === undefined) return [Option.none(), pending]
          const remaining = hit.remaining
          if (remaining === "always") return [Option.some(hit.rule.fault), pending]
          const next = remaining <= 1
            ? pending.filter((_, i) => i !== index)
            : pending.map((p, i) => i === index ? { ...p, remaining: remaining - 1 } : p)
          return [Option.some(hit.rule.fault), next]
        })
    })
  })

/** The fault book, starting with `initial` rules. */
export const layer = (initial: ReadonlyArray<FaultRule> = []): Layer.Layer<FaultBook> => Layer.effect(FaultBook, make(initial))
