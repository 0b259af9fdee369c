/** Where a hook stands, in a sentence: failing since when, or disabled when and why. */
import type { PortalApi } from "../api.js"
import { Time } from "../ui/Time.js"

export const HookState = ({ hook }: { readonly hook: PortalApi.HookView }) => {
  if (hook.state === "disabled") {
    return (
      <p className="notice" data-testid="hook-state">
        <span className="badge disabled">disabled</span> since {hook.disabled_at === null ? "—" : <Time at={hook.disabled_at} />}:{" "}
        {(hook.disabled_reason ?? "no reason given").replace(/\.$/, "")}. No new events are sent to it: enable it, then recover what it missed.
      </p>
    )
  }
  if (hook.state === "failing") {
    return (
      <p className="hint" data-testid="hook-state">
        <span className="badge failed">failing</span> every attempt has failed since{" "}
        {hook.failing_since === null ? "—" : <Time at={hook.failing_since} />}; it is disabled if this goes on for days.
      </p>
    )
  }
  return null
}
