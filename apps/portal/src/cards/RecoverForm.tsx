/**
 * Recover: send again every failed or ended delivery of one hook since a
 * time (and up to another, if given). The server refuses a window in the
 * future or reversed, and a disabled hook; its sentence is shown as it is.
 */
import { type FormEvent, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { RecoveryProgress } from "./RecoveryProgress.js"

/** The input's local date and time (`datetime-local`) of `millis`. */
const localInput = (millis: number) => {
  const d = new Date(millis - new Date(millis).getTimezoneOffset() * 60_000)
  return d.toISOString().slice(0, 16)
}

export const RecoverForm = ({ client, hook }: { readonly client: Client; readonly hook: PortalApi.HookView }) => {
  const [since, setSince] = useState(() => localInput(Date.now() - 24 * 3_600_000))
  const [until, setUntil] = useState("")
  const [error, setError] = useState<string | undefined>(undefined)
  const [started, setStarted] = useState<PortalApi.RecoveryView | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const id = `recover-${hook.id}`

  const submit = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    const range = { since: new Date(since), ...(until === "" ? {} : { until: new Date(until) }) }
    void run(client.hooks.recover({ path: { id: hook.id }, payload: range })).then((result) => {
      setBusy(false)
      if (!result.ok) return setError(result.error)
      setStarted(result.value)
    })
  }

  return (
    <form onSubmit={submit} className="detail" aria-label={`Recover deliveries of ${hook.target_url}`} data-testid="recover-form">
      <p className="hint">Sends again every failed or ended delivery of this hook created in the window, with the same webhook-id.</p>
      <div className="row">
        <label htmlFor={`${id}-since`}>Since</label>
        <input id={`${id}-since`} type="datetime-local" required value={since} onChange={(e) => setSince(e.target.value)} />
        <label htmlFor={`${id}-until`}>Until (optional)</label>
        <input id={`${id}-until`} type="datetime-local" value={until} onChange={(e) => setUntil(e.target.value)} />
        <button type="submit" disabled={busy}>Recover</button>
      </div>
      {error !== undefined && <p className="error" role="alert">{error}</p>}
      {started !== undefined && <RecoveryProgress key={started.id} client={client} first={started} />}
    </form>
  )
}
