/**
 * `crm-relay subscriptions show|disable|enable|recover|recovery`: where a
 * subscription stands (active, failing since when, disabled when and why,
 * removed when and why), turning it off and on, and recover — every failed
 * or ended delivery since a time queued again, in the background, with
 * progress (`--wait` follows it to the end).
 */
import { Command, Options } from "@effect/cli"
import type * as Api from "@crm-relay/contract/InternalApi/SubscriptionLifecycleApi"
import { type Context, Duration, Effect, Option } from "effect"
import { refused } from "./AdminError.js"
import { json, print } from "./Output.js"
import * as Progress from "./Progress.js"
import type * as Operations from "./SubscriptionOperations.js"

// Loaded when the command runs: help and the other commands never load the data access.
const withSubscriptions = <A, E>(f: (operations: Context.Tag.Service<typeof Operations.SubscriptionOperations>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(() => import("./SubscriptionOperations.js")), (operations) => operations.withOperations(f))

const account = Options.text("account").pipe(Options.withDescription("Id of the account the subscription belongs to."))
const id = Options.text("id").pipe(Options.withDescription("Id of the subscription."))

/** A subscription's lifecycle as text. */
export const describeStatus = (s: Api.SubscriptionStatus): string =>
  [
    `${s.id}  ${s.event}  ${s.target}  ${s.state}`,
    ...(s.failing_since === null ? [] : [`    every attempt failed since ${s.failing_since}`]),
    ...(s.disabled_at === null ? [] : [`    disabled ${s.disabled_at}: ${s.disabled_reason ?? ""}`]),
    ...(s.removed_at === null ? [] : [`    removed ${s.removed_at} (${s.removed_reason ?? "unsubscribed"})`])
  ].join("\n")

/** A recovery's progress as text. */
export const describeRecovery = (r: Api.RecoveryView): string =>
  `Recovery ${r.id} of subscription ${r.subscription_id} (${r.since} to ${r.until}): ${r.status}, ` +
  `${r.queued} of ${r.total} queued again${r.skipped > 0 ? `, ${r.skipped} skipped (payload dropped)` : ""}` +
  `${r.last_error === null ? "" : `; last error: ${r.last_error}`}`

const instant = (flag: string, text: string) => {
  const at = new Date(text)
  return Number.isNaN(at.getTime())
    ? Effect.fail(refused(`--${flag}: ${JSON.stringify(text)} is not a date and time; use ISO 8601, e.g. 2026-01-31T12:00:00Z.`))
    : Effect.succeed(at)
}

const show = Command.make("show", { account, id, json }, ({ account, id, json }) =>
  withSubscriptions((operations) => Effect.flatMap(operations.show(account, id), (s) => print(json, s, describeStatus(s))))).pipe(
    Command.withDescription("Show where a subscription stands. Active, failing (since when), disabled (when, why) or removed (when, why: gone after a 410).")
  )

const disable = Command.make(
  "disable",
  { account, id, reason: Options.text("reason").pipe(Options.optional, Options.withDescription("Why, shown to the account and the operator.")), json },
  ({ account, id, json, reason }) =>
    withSubscriptions((operations) =>
      Effect.flatMap(operations.disable(account, id, reason), (answer) =>
        print(json, answer, answer.outcome === "disabled"
          ? `Disabled subscription ${id}: no new deliveries are queued for it, its pending ones ended.`
          : `Subscription ${id} was already disabled.`))
    )
).pipe(Command.withDescription("Disable a subscription (not delete it): no new deliveries, pending ones end as disabled."))

const enable = Command.make("enable", { account, id, json }, ({ account, id, json }) =>
  withSubscriptions((operations) =>
    Effect.flatMap(operations.enable(account, id), (answer) =>
      print(json, answer, answer.outcome === "enabled"
        ? `Enabled subscription ${id}: new events are delivered again. To resend what ended meanwhile: crm-relay subscriptions recover --account ${account} --id ${id} --since <time>`
        : `Subscription ${id} was already enabled.`))
  )).pipe(Command.withDescription("Enable a disabled subscription: new events are delivered again, its failure clock starts afresh."))

const POLL = Duration.seconds(1)

const recover = Command.make(
  "recover",
  {
    account,
    id,
    since: Options.text("since").pipe(Options.withDescription("Replay deliveries created at or after this time (ISO 8601).")),
    until: Options.text("until").pipe(Options.optional, Options.withDescription("… and at or before this time (default: now).")),
    wait: Options.boolean("wait").pipe(Options.withDescription("Follow the recovery until it is done, with progress.")),
    json
  },
  ({ account, id, json, since, until, wait }) =>
    withSubscriptions((operations) =>
      Effect.gen(function*() {
        const window = {
          since: yield* instant("since", since),
          ...(Option.isSome(until) ? { until: yield* instant("until", until.value) } : {})
        }
        let recovery = yield* operations.recover(account, id, window)
        const mode = Progress.mode(json)
        while (wait && recovery.status === "running") {
          yield* Progress.report(mode, "Queued again", recovery.queued + recovery.skipped, recovery.total)
          yield* Effect.sleep(POLL)
          recovery = yield* operations.recovery(account, recovery.id)
        }
        if (wait) yield* Progress.report(mode, "Queued again", recovery.total, recovery.total)
        yield* print(json, recovery, [
          describeRecovery(recovery),
          ...(recovery.status === "running" ? [`Follow it: crm-relay subscriptions recovery --account ${account} --id ${recovery.id}`] : [])
        ].join("\n"))
      })
    )
).pipe(Command.withDescription("Replay every failed or ended delivery of a subscription created since a time (same webhook-id), in the background; --wait follows it."))

const recovery = Command.make(
  "recovery",
  { account, id: Options.text("id").pipe(Options.withDescription("Id of the recovery (recover printed it).")), json },
  ({ account, id, json }) =>
    withSubscriptions((operations) => Effect.flatMap(operations.recovery(account, id), (r) => print(json, r, describeRecovery(r))))
).pipe(Command.withDescription("Show a recovery's progress: running, done or failed; how many deliveries were queued again."))

/** `subscriptions show|disable|enable|recover|recovery`. */
export const lifecycleCommands = [show, disable, enable, recover, recovery] as const
