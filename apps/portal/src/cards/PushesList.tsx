/** CRM pushes per call: steps with their receipts' ids, status, why it stopped; replay a failed one. */
import { useState } from "react"
import { type Client, run } from "../api.js"
import { Status } from "../ui/Status.js"
import { Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"

export const PushesList = ({ client, everyMs }: { readonly client: Client; readonly everyMs: number }) => {
  const pushes = useLoad(() => run(client.activity.pushes()), [client], everyMs)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const replay = (id: string) =>
    void run(client.activity.replayPush({ path: { id } })).then((result) => {
      setMessage(result.ok ? { ok: "Queued again; steps already done are not repeated." } : { error: result.error })
      pushes.reload()
    })
  return (
    <>
      <Status error={message.error ?? pushes.error} ok={message.ok} />
      {pushes.data !== undefined && pushes.data.pushes.length === 0 && <p className="empty">No CRM pushes yet.</p>}
      {pushes.data !== undefined && pushes.data.pushes.length > 0 && (
        <ul className="list">
          {pushes.data.pushes.map((p) => (
            <li key={p.id} data-testid="push-row">
              <div className="grow">
                <strong>Call <code>{p.call_id}</code></strong> · tenant {p.tenant_id} · <span className={`badge ${p.status}`}>{p.status}</span>
                {" "}· {p.attempts} attempt{p.attempts === 1 ? "" : "s"} · <Time at={p.updated_at} />
                {p.steps.length > 0 && (
                  <ol className="steps">
                    {p.steps.map((s) => (
                      <li key={s.operation}>{s.operation}: {s.outcome}{s.receipt_id !== null && <> — receipt <code>{s.receipt_id}</code></>}</li>
                    ))}
                  </ol>
                )}
                {p.last_error !== null && <p className="hint">Stopped: {p.last_error}</p>}
              </div>
              {p.status === "failed" && <button type="button" onClick={() => replay(p.id)}>Replay</button>}
            </li>
          ))}
        </ul>
      )}
    </>
  )
}
