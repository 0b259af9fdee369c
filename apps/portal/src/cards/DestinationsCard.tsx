/**
 * Card: event destinations — the account's own systems that receive its lead
 * and booking events beside the hooks (an HTTPS webhook, a RabbitMQ exchange,
 * a NATS JetStream subject), each listed with where it stands and its latest
 * deliveries, and the form that adds one after checking it. Refreshed every
 * few seconds while the page is visible, so a failing or disabled one shows
 * without a reload.
 */
import { useState } from "react"
import { type Client, type PortalApi, type Result, run } from "../api.js"
import { Status } from "../ui/Status.js"
import { useLoad } from "../ui/useLoad.js"
import { DestinationForm } from "./DestinationForm.js"
import { DestinationRow } from "./DestinationRow.js"

export const DestinationsCard = ({ client }: { readonly client: Client }) => {
  const list = useLoad(() => run(client.destinations.list()), [client], 3000)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const [tests, setTests] = useState<Record<string, string>>({})

  const done = (ok: string) => (result: Result<unknown>) => {
    setMessage(result.ok ? { ok } : { error: result.error })
    list.reload()
  }
  const test = (id: string) =>
    void run(client.destinations.test({ path: { id } })).then((result) => {
      if (!result.ok) return setMessage({ error: result.error })
      setMessage({})
      setTests((current) => ({ ...current, [id]: result.value.delivery_id }))
    })
  const toggle = (d: PortalApi.PortalDestinationView) =>
    void (d.state === "disabled"
      ? run(client.destinations.enable({ path: { id: d.id } })).then(done(`${d.name} enabled: new events are sent to it again.`))
      : run(client.destinations.disable({ path: { id: d.id } })).then(done(`${d.name} disabled: no events are sent to it until you enable it.`)))
  const remove = (d: PortalApi.PortalDestinationView) =>
    void run(client.destinations.remove({ path: { id: d.id } })).then(done(`${d.name} removed: nothing more is sent to it.`))

  return (
    <section className="card" id="destinations" aria-labelledby="destinations-title" data-card="destinations">
      <h2 id="destinations-title">Event destinations</h2>
      <p className="hint">
        A destination is one of your own systems that receives this account's events as they happen — a RabbitMQ exchange, a NATS
        JetStream subject or an HTTPS webhook — each message signed and carrying its delivery id, like every webhook.
      </p>
      <Status error={message.error ?? (list.error === undefined ? undefined : `The destinations could not be loaded: ${list.error}`)} ok={message.ok} />
      {list.loading && list.data === undefined && list.error === undefined && <p className="hint" role="status">Loading destinations…</p>}
      {list.data !== undefined && list.data.destinations.length === 0 && (
        <p className="empty" data-testid="destinations-empty">No destinations yet. Add one below to receive leads and bookings in your own queue or stream.</p>
      )}
      {list.data !== undefined && list.data.destinations.length > 0 && (
        <ul className="list">
          {list.data.destinations.map((d) => (
            <DestinationRow
              key={d.id}
              client={client}
              destination={d}
              testId={tests[d.id]}
              onTest={() => test(d.id)}
              onToggle={() => toggle(d)}
              onRemove={() => remove(d)}
            />
          ))}
        </ul>
      )}
      <DestinationForm
        client={client}
        onCreated={(name) => {
          setMessage({ ok: `${name} created: the check passed. Send it a test event to see a message arrive.` })
          list.reload()
        }}
      />
    </section>
  )
}
