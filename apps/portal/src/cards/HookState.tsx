/** Where a hook or a destination stands, in a sentence: failing since when, or disabled when and why. */
import type { PortalApi } from "../api.js"
import { Time } from "../ui/Time.js"

/** What the sentence reads: a hook's or a destination's state and times. */
type Standing = Pick<PortalApi.HookView, "state" | "failing_since" | "disabled_at" | "disabled_reason">

export const HookState = ({ hook, next = "No new events are sent to it: enable it, then recover what it missed.", testId = "hook-state" }: {
  readonly hook: Standing
  /** What follows for a disabled one (a destination has no recover in the page). */
  readonly next?: string
  readonly testId?: string
}) => {
  if (hook.state === "disabled") {
    return (
      <p className="notice" data-testid={testId}>
        <span className="badge disabled">disabled</span> since {hook.disabled_at === null ? "—" : <Time at={hook.disabled_at} />}:{" "}
        {(hook.disabled_reason ?? "no reason given").replace(/\.$/, "")}. {next}
      </p>
    )
  }
  if (hook.state === "failing") {
    return (
      <p className="hint" data-testid={testId}>
        <span className="badge failed">failing</span> every attempt has failed since{" "}
        {hook.failing_since === null ? "—" : <Time at={hook.failing_since} />}; it is disabled if this goes on for days.
      </p>
    )
  }
  return null
}
