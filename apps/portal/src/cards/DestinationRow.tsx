/**
 * One destination: its name and kind, where it sends (the URL without
 * credentials, and the exchange and routing key or the subject and stream),
 * which events, whether credentials are set (never what they are), where it
 * stands, its latest deliveries; send it a test event, disable or enable it,
 * or remove it after a confirmation.
 */
import { useState } from "react"
import type { Client, PortalApi } from "../api.js"
import { Time } from "../ui/Time.js"
import { HookState } from "./HookState.js"
import { RecentDeliveries } from "./RecentDeliveries.js"
import { TestResult } from "./TestResult.js"

const kindNames: Readonly<Record<string, string>> = { webhook: "Webhook", rabbitmq: "RabbitMQ", nats: "NATS JetStream" }

const eventNames: Readonly<Record<string, string>> = { all: "leads and bookings", lead: "leads", booking: "bookings" }

/** The kind's own settings beside its URL, in words. */
const where = (d: PortalApi.PortalDestinationView): string | undefined => {
  const text = (key: string) => (typeof d.config[key] === "string" ? (d.config[key] as string) : undefined)
  if (d.kind === "rabbitmq") return `exchange ${text("exchange") ?? "?"}, routing key "${text("routing_key") ?? ""}"`
  if (d.kind === "nats") return `subject ${text("subject") ?? "?"}${text("stream") === undefined ? "" : ` on stream ${text("stream")}`}`
  return undefined
}

export const DestinationRow = (props: {
  readonly client: Client
  readonly destination: PortalApi.PortalDestinationView
  readonly testId: string | undefined
  readonly onTest: () => void
  readonly onToggle: () => void
  readonly onRemove: () => void
}) => {
  const d = props.destination
  const [confirming, setConfirming] = useState(false)
  const settings = where(d)
  return (
    <li data-testid="destination-row" data-kind={d.kind} data-state={d.state}>
      <div className="grow">
        <strong>{d.name}</strong> <span className="tag">{kindNames[d.kind] ?? d.kind}</span>
        {d.state === "active" && <span className="badge delivered" data-testid="destination-state">active</span>}
        <div><code className="url">{d.target}</code>{settings !== undefined && <span className="hint"> · {settings}</span>}</div>
        <div className="hint">
          {eventNames[d.event] ?? d.event} · created <Time at={d.created_at} /> ·{" "}
          {d.has_credentials ? "credentials set (never shown again)" : "no credentials"}
        </div>
        <HookState hook={d} testId="destination-state" next="No new events are sent to it until you enable it." />
        {props.testId !== undefined && <TestResult client={props.client} deliveryId={props.testId} />}
        <RecentDeliveries deliveries={d.recent_deliveries} />
      </div>
      <button type="button" onClick={props.onTest}>Send test event</button>
      <button type="button" onClick={props.onToggle}>{d.state === "disabled" ? "Enable" : "Disable"}</button>
      {!confirming && (
        <button type="button" className="danger" onClick={() => setConfirming(true)} aria-label={`Remove destination ${d.name}`}>Remove</button>
      )}
      {confirming && (
        <div className="notice" role="group" aria-label={`Remove destination ${d.name}?`}>
          Remove {d.name}? Nothing more is sent to it, and this cannot be undone.{" "}
          <button type="button" className="danger" onClick={props.onRemove}>Remove it</button>{" "}
          <button type="button" onClick={() => setConfirming(false)}>Keep it</button>
        </div>
      )}
    </li>
  )
}
