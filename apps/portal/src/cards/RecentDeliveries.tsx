/** A destination's latest deliveries, newest first: when, which event, how it ended and the last error. */
import type { PortalApi } from "../api.js"
import { heldSentence } from "@crm-relay/contract/Deliveries"
import { endedAs } from "../ui/endReason.js"
import { localTime, Time } from "../ui/Time.js"

export const RecentDeliveries = ({ deliveries }: { readonly deliveries: ReadonlyArray<PortalApi.DeliveryView> }) =>
  deliveries.length === 0
    ? <p className="hint" data-testid="recent-deliveries">No deliveries yet: send a test event to see one here.</p>
    : (
      <details data-testid="recent-deliveries">
        <summary>Latest deliveries ({deliveries.length})</summary>
        <ul className="list">
          {deliveries.map((d) => (
            <li key={d.id} data-testid="recent-delivery" data-status={d.status}>
              <div className="grow">
                <Time at={d.created_at} /> · {d.event}{d.test && <span className="tag">test</span>} ·{" "}
                <span className={`badge ${d.status}`}>{d.status}</span> · {d.attempts} {d.attempts === 1 ? "attempt" : "attempts"}
                {d.end_reason !== null && <span className="hint"> · {endedAs(d.end_reason)}</span>}
                {d.held !== null && <div className="hint" data-testid="held">{heldSentence(d.held, localTime)}</div>}
                {d.last_error !== null && d.status !== "delivered" && <div className="hint">{d.last_error}</div>}
              </div>
            </li>
          ))}
        </ul>
      </details>
    )
