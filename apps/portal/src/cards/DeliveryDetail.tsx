/** One delivery: its payload exactly as sent, every attempt, and replay. */
import { useState } from "react"
import { type Client, run } from "../api.js"
import { endedAs } from "../ui/endReason.js"
import { Status } from "../ui/Status.js"
import { Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"

export const DeliveryDetail = ({ client, id, onReplayed }: { readonly client: Client; readonly id: string; readonly onReplayed: () => void }) => {
  const detail = useLoad(() => run(client.activity.delivery({ path: { id } })), [client, id], 3000)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const replay = () =>
    void run(client.activity.replayDelivery({ path: { id } })).then((result) => {
      setMessage(
        !result.ok
          ? { error: result.error }
          : result.value.outcome === "queued"
          ? { ok: "Queued again: it will be sent now, with the same webhook-id." }
          : { ok: "It is still waiting for its next attempt; nothing changed." }
      )
      detail.reload()
      onReplayed()
    })
  const d = detail.data
  return (
    <div className="detail" role="region" aria-label="Delivery details" data-testid="delivery-detail">
      <Status error={message.error ?? detail.error} ok={message.ok} />
      {d !== undefined && (
        <>
          <p>
            <strong>{d.event}</strong> for call <code>{d.call_id}</code> to <code className="url">{d.target}</code>:{" "}
            {d.end_reason !== null ? endedAs(d.end_reason) : d.status}
            {d.last_error !== null && <> — {d.last_error}</>}
          </p>
          {d.status !== "pending" && (d.not_replayable === null
            ? <button type="button" onClick={replay}>Replay</button>
            : <p className="hint" data-testid="not-replayable">{d.not_replayable}</p>)}
          <h4>Attempts</h4>
          {d.attempt_log.length === 0
            ? <p className="empty">No attempt yet.</p>
            : (
              <ol>
                {d.attempt_log.map((a) => (
                  <li key={a.attempt + a.at}>
                    <Time at={a.at} />: {a.result === "ended" ? endedAs(a.error_class) ?? "ended" : a.result}
                    {a.status_code !== null && <>, HTTP {a.status_code}</>}, {a.duration_ms} ms
                    {a.error !== null && <> — {a.error}</>}
                  </li>
                ))}
              </ol>
            )}
          <h4>Payload</h4>
          <pre className="payload" tabIndex={0} aria-label="Payload as sent"><code>{JSON.stringify(JSON.parse(d.payload === "" ? "null" : d.payload), null, 2)}</code></pre>
        </>
      )}
    </div>
  )
}
