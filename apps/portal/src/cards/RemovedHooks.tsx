/** Hooks removed lately and why: the receiver said it no longer exists (410 Gone), or it was unsubscribed. */
import type { PortalApi } from "../api.js"
import { Time } from "../ui/Time.js"

const why = (hook: PortalApi.HookView) =>
  hook.removed_reason === "gone"
    ? "gone — the receiver said the hook no longer exists (it answered 410 Gone)"
    : "unsubscribed — removed through the API, by your account manager or in this page"

export const RemovedHooks = ({ removed }: { readonly removed: ReadonlyArray<PortalApi.HookView> }) =>
  removed.length === 0 ? null : (
    <details data-testid="removed-hooks">
      <summary>Removed hooks ({removed.length})</summary>
      <ul className="list">
        {removed.map((hook) => (
          <li key={hook.id} data-testid="removed-hook">
            <div className="grow">
              <code className="url">{hook.target_url}</code>
              <div className="hint">
                {hook.event} events · removed {hook.removed_at === null ? "" : <Time at={hook.removed_at} />}: {why(hook)}
              </div>
            </div>
          </li>
        ))}
      </ul>
    </details>
  )
