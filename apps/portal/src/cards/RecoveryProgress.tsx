/** A recovery's progress, read every second until it is done (or failed). */
import { useEffect, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"

const sentence = (r: PortalApi.RecoveryView) => {
  const skipped = r.skipped === 0 ? "" : `; ${r.skipped} could not be sent again (their content was already deleted)`
  if (r.status === "done") return `Recovery done: ${r.queued} of ${r.total} deliveries queued again${skipped}.`
  if (r.status === "failed") return `Recovery stopped: ${r.last_error ?? "unknown error"}. ${r.queued} of ${r.total} were queued again.`
  return `Recovering: ${r.queued} of ${r.total} deliveries queued again so far${skipped}…`
}

export const RecoveryProgress = ({ client, first }: { readonly client: Client; readonly first: PortalApi.RecoveryView }) => {
  const [recovery, setRecovery] = useState(first)
  const [error, setError] = useState<string | undefined>(undefined)
  useEffect(() => {
    if (first.status !== "running") return
    let stop = false
    const poll = () =>
      void run(client.hooks.recovery({ path: { id: first.id } })).then((result) => {
        if (stop) return
        if (!result.ok) setError(result.error)
        else setRecovery(result.value)
        if (!result.ok || result.value.status === "running") window.setTimeout(poll, 1000)
      })
    window.setTimeout(poll, 500)
    return () => {
      stop = true
    }
  }, [client, first])
  return (
    <div data-testid="recovery">
      <p role="status" className={recovery.status === "failed" ? "error" : recovery.status === "done" ? "ok" : "hint"}>{sentence(recovery)}</p>
      {recovery.total > 0 && (
        <progress max={recovery.total} value={recovery.queued + recovery.skipped} aria-label="Recovery progress">
          {recovery.queued + recovery.skipped} of {recovery.total}
        </progress>
      )}
      {error !== undefined && <p className="error" role="alert">{error}</p>}
    </div>
  )
}
