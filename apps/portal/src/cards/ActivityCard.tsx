/**
 * Card 3: what was sent — webhook deliveries (filter by status and event; a
 * detail view with the payload and every attempt; replay) and CRM pushes
 * (per call: the steps and their receipts' ids, why it stopped; replay a
 * failed one). Refreshed every few seconds while the page is visible.
 */
import { useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { heldSentence } from "@crm-relay/contract/Deliveries"
import { endedAs } from "../ui/endReason.js"
import { Status } from "../ui/Status.js"
import { localTime, Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"
import { DeliveryDetail } from "./DeliveryDetail.js"
import { PushesList } from "./PushesList.js"

const LIVE_MS = 3000

type StatusFilter = "" | "pending" | "delivered" | "failed" | "ended"
type EventFilter = "" | "lead" | "booking"

const lastResult = (d: PortalApi.DeliveryView) =>
  d.last_status_code !== null ? `HTTP ${d.last_status_code}` : d.last_error_class ?? "—"

export const ActivityCard = ({ client }: { readonly client: Client }) => {
  const [status, setStatus] = useState<StatusFilter>("")
  const [event, setEvent] = useState<EventFilter>("")
  const [open, setOpen] = useState<string | undefined>(undefined)
  const deliveries = useLoad(
    () =>
      run(client.activity.deliveries({
        urlParams: { ...(status === "" ? {} : { status }), ...(event === "" ? {} : { event }) }
      })),
    [client, status, event],
    LIVE_MS
  )

  return (
    <section className="card" id="activity" aria-labelledby="activity-title" data-card="activity">
      <h2 id="activity-title">Activity</h2>
      <h3>Webhook deliveries</h3>
      <div className="row">
        <label htmlFor="f-status">Status</label>
        <select id="f-status" value={status} onChange={(e) => setStatus(e.target.value as StatusFilter)}>
          <option value="">any</option>
          <option value="pending">pending</option>
          <option value="delivered">delivered</option>
          <option value="failed">failed</option>
          <option value="ended">ended (gone, aborted, disabled)</option>
        </select>
        <label htmlFor="f-event">Event</label>
        <select id="f-event" value={event} onChange={(e) => setEvent(e.target.value as EventFilter)}>
          <option value="">any</option>
          <option value="lead">lead</option>
          <option value="booking">booking</option>
        </select>
        <span className="hint" aria-live="off">Updates live.</span>
      </div>
      <Status error={deliveries.error} />
      {deliveries.data !== undefined && deliveries.data.deliveries.length === 0 && (
        <p className="empty">No deliveries{status !== "" || event !== "" ? " match these filters" : " yet"}.</p>
      )}
      {deliveries.data !== undefined && deliveries.data.deliveries.length > 0 && (
        <div className="scroll">
          <table>
            <caption className="sr-only">Webhook deliveries, latest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th><th scope="col">Event</th><th scope="col">Call</th><th scope="col">Receiver</th>
                <th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Duration</th>
                <th scope="col"><span className="sr-only">Details</span></th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.deliveries.map((d) => (
                <tr key={d.id} data-testid="delivery-row" data-status={d.status}>
                  <td><Time at={d.created_at} /></td>
                  <td>{d.event}{d.test && <span className="tag">test</span>}</td>
                  <td><code>{d.call_id}</code></td>
                  <td>{d.target_host}</td>
                  <td>
                    <span className={`badge ${d.status}`}>{d.status}</span>
                    {d.end_reason !== null && <div className="hint" data-testid="end-reason">{endedAs(d.end_reason)}</div>}
                    {d.held !== null && <div className="hint" data-testid="held">{heldSentence(d.held, localTime)}</div>}
                  </td>
                  <td>{d.attempts}</td>
                  <td>{lastResult(d)}</td>
                  <td>{d.last_duration_ms === null ? "—" : `${d.last_duration_ms} ms`}</td>
                  <td>
                    <button type="button" aria-expanded={open === d.id} onClick={() => setOpen(open === d.id ? undefined : d.id)}>
                      {open === d.id ? "Close" : "Details"}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {open !== undefined && <DeliveryDetail client={client} id={open} onReplayed={deliveries.reload} />}
      <h3>CRM pushes</h3>
      <PushesList client={client} everyMs={LIVE_MS} />
    </section>
  )
}
