import type { PortalApi } from "../api.js"

/** What a bridge advertised: its operations and whether a booking closes availability. */
export const Capabilities = ({ capabilities }: { readonly capabilities: PortalApi.ConnectionView["capabilities"] }) => (
  <div className="caps" data-testid="capabilities">
    <span className="hint">Operations: </span>
    {capabilities.operations.map((op) => <code key={op} className="tag">{op}</code>)}
    <span className="hint">
      {" "}· a booking {capabilities.booking_closes_availability ? "closes" : "does not close"} availability
    </span>
  </div>
)
