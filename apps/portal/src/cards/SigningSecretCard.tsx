/**
 * The signing secret: revealed on request, rotated with an overlap during
 * which deliveries carry both signatures, and a short snippet showing how a
 * receiver verifies them.
 */
import { useState } from "react"
import { type Client, run } from "../api.js"
import { CopyButton } from "../ui/CopyButton.js"
import { Status } from "../ui/Status.js"
import { Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"

const SNIPPET = `// Node, with the standardwebhooks package (npm i standardwebhooks)
import { Webhook } from "standardwebhooks"

const wh = new Webhook(process.env.CRM_RELAY_SIGNING_SECRET) // whsec_…
// Verify the raw body, exactly as received, before parsing it:
const event = wh.verify(rawBody, {
  "webhook-id": req.headers["webhook-id"],
  "webhook-timestamp": req.headers["webhook-timestamp"],
  "webhook-signature": req.headers["webhook-signature"],
}) // throws when no signature matches`

export const SigningSecretCard = ({ client }: { readonly client: Client }) => {
  const state = useLoad(() => run(client.signingSecret.get()), [client])
  const [revealed, setRevealed] = useState<{ secret: string; previous_secret: string | null } | undefined>(undefined)
  const [overlap, setOverlap] = useState(24)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})

  const reveal = () =>
    void run(client.signingSecret.reveal()).then((result) =>
      result.ok ? setRevealed(result.value) : setMessage({ error: result.error }))
  const rotate = () =>
    void run(client.signingSecret.rotate({ payload: { overlap_hours: overlap } })).then((result) => {
      if (!result.ok) return setMessage({ error: result.error })
      setRevealed(undefined)
      setMessage({ ok: overlap > 0 ? `Rotated. Both secrets sign deliveries for ${overlap} hours: update your receivers now.` : "Rotated." })
      state.reload()
    })

  return (
    <div className="part" data-card="signing-secret">
      <h3>Signing secret</h3>
      <p className="hint">
        Every delivery carries Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature). Check the signature with
        this secret before trusting a delivery.
      </p>
      {state.data !== undefined && (
        <p>
          Created <Time at={state.data.created_at} />
          {state.data.rotated_at !== null && <>, last rotated <Time at={state.data.rotated_at} /></>}.
          {state.data.previous_until !== null && (
            <> The previous secret signs too until <Time at={state.data.previous_until} />.</>
          )}
        </p>
      )}
      <Status error={message.error ?? state.error} ok={message.ok} />
      {revealed === undefined
        ? <button type="button" onClick={reveal}>Reveal secret</button>
        : (
          <div className="reveal" role="region" aria-label="Signing secret">
            <code data-testid="signing-secret">{revealed.secret}</code>
            <CopyButton text={revealed.secret} label="Copy secret" />
            <button type="button" onClick={() => setRevealed(undefined)}>Hide</button>
            {revealed.previous_secret !== null && <p className="hint">The previous secret still signs during the overlap.</p>}
          </div>
        )}
      <div className="row">
        <label htmlFor="overlap">Overlap (hours)</label>
        <input id="overlap" type="number" min={0} max={168} value={overlap} onChange={(e) => setOverlap(Number(e.target.value))} />
        <button type="button" onClick={rotate}>Rotate secret</button>
      </div>
      <details>
        <summary>Verify our signatures</summary>
        <pre><code>{SNIPPET}</code></pre>
      </details>
    </div>
  )
}
