/**
 * Integration keys: create one with a label (the key is shown once, here,
 * with a copy button), list them (label, last four, created, last used,
 * turned off), turn one off after a confirmation.
 */
import { type FormEvent, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { CopyButton } from "../ui/CopyButton.js"
import { Status } from "../ui/Status.js"
import { Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"

export const KeysCard = ({ client }: { readonly client: Client }) => {
  const keys = useLoad(() => run(client.keys.list()), [client])
  const [label, setLabel] = useState("")
  const [created, setCreated] = useState<PortalApi.CreatedKey | undefined>(undefined)
  const [confirming, setConfirming] = useState<string | undefined>(undefined)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const [busy, setBusy] = useState(false)

  const create = (event: FormEvent) => {
    event.preventDefault()
    setBusy(true)
    void run(client.keys.create({ payload: { label } })).then((result) => {
      setBusy(false)
      if (!result.ok) return setMessage({ error: result.error })
      setCreated(result.value)
      setLabel("")
      setMessage({})
      keys.reload()
    })
  }
  const disable = (keyId: string) => {
    void run(client.keys.disable({ path: { keyId } })).then((result) => {
      setConfirming(undefined)
      setMessage(result.ok ? { ok: "The key is turned off. Its hooks stay." } : { error: result.error })
      keys.reload()
    })
  }

  return (
    <div className="part" data-card="keys">
      <h3>Integration keys</h3>
      <form onSubmit={create} className="row">
        <label htmlFor="key-label">Label</label>
        <input id="key-label" value={label} maxLength={100} placeholder="e.g. Zapier" onChange={(e) => setLabel(e.target.value)} />
        <button type="submit" disabled={busy}>Create key</button>
      </form>
      {created !== undefined && (
        <div className="reveal" role="region" aria-label="New key" data-testid="new-key">
          <p>
            <strong>Copy this key now: it is shown only once.</strong> Keep it in a server-side secret store, never in browser code,
            a public repository or a URL.
          </p>
          <code data-testid="new-key-value">{created.key}</code>
          <CopyButton text={created.key} label="Copy key" />
          <button type="button" onClick={() => setCreated(undefined)}>I have stored it</button>
        </div>
      )}
      <Status error={message.error ?? keys.error} ok={message.ok} />
      {keys.data !== undefined && keys.data.keys.length === 0 && <p className="empty">No keys yet. Create one for each platform you connect.</p>}
      {keys.data !== undefined && keys.data.keys.length > 0 && (
        <table>
          <caption className="sr-only">Integration keys</caption>
          <thead>
            <tr><th scope="col">Label</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col"><span className="sr-only">Actions</span></th></tr>
          </thead>
          <tbody>
            {keys.data.keys.map((key) => (
              <tr key={key.id} data-testid="key-row">
                <td>{key.label ?? <span className="hint">no label</span>}</td>
                <td><code>{key.last_four === null ? "…" : `crk_…${key.last_four}`}</code></td>
                <td><Time at={key.created_at} /></td>
                <td><Time at={key.last_used_at} /></td>
                <td>{key.disabled_at === null ? "on" : <>turned off <Time at={key.disabled_at} /></>}</td>
                <td>
                  {key.disabled_at === null && confirming !== key.id && (
                    <button type="button" onClick={() => setConfirming(key.id)}>Turn off…</button>
                  )}
                  {confirming === key.id && (
                    <span role="group" aria-label="Confirm turning the key off">
                      <span className="hint">Requests with this key will be refused. </span>
                      <button type="button" className="danger" onClick={() => disable(key.id)}>Turn off key</button>
                      <button type="button" onClick={() => setConfirming(undefined)}>Cancel</button>
                    </span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}
