/**
 * Card 2: the CRM bridge — each client tenant's connection (secrets only as
 * "set on DATE") and the connection form. Demo and sandbox accounts see why
 * they cannot connect a real CRM, with the form disabled. Each stored
 * connection can run the read-only conformance check.
 */
import { useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { Status } from "../ui/Status.js"
import { DateOnly, Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"
import { Capabilities } from "./Capabilities.js"
import { ConformanceCheck } from "./ConformanceCheck.js"
import { ConnectionForm } from "./ConnectionForm.js"

export const BridgeCard = ({ client, mode }: { readonly client: Client; readonly mode: string }) => {
  const state = useLoad(() => run(client.connections.list()), [client])
  const [editing, setEditing] = useState<PortalApi.ConnectionView | "new" | undefined>(undefined)
  const allowed = state.data?.allowed ?? mode === "live"

  return (
    <section className="card" id="bridge" aria-labelledby="bridge-title" data-card="bridge">
      <h2 id="bridge-title">CRM bridge</h2>
      <p className="hint">
        Calls are written to your CRM through your bridge (svc.crm.v1). Connecting runs the capabilities check only: nothing is written.
        "Check conformance" proves a stored connection follows the contract's read-only rules, also without writing anything.
      </p>
      {state.data === undefined && state.error === undefined && <p className="hint" role="status">Loading connections…</p>}
      {state.data !== undefined && !state.data.allowed && <p className="notice" data-testid="not-allowed">{state.data.reason}</p>}
      <Status error={state.error} />
      {state.data !== undefined && state.data.connections.length === 0 && allowed && <p className="empty">No tenant is connected yet.</p>}
      {state.data !== undefined && state.data.connections.length > 0 && (
        <ul className="list">
          {state.data.connections.map((c) => (
            <li key={c.tenant_id} data-testid="connection-row">
              <div className="grow">
                <strong>Tenant {c.tenant_id}</strong> · {c.transport.toUpperCase()} · <code className="url">{c.url}</code>
                <div className="hint">
                  {c.auth.type === "api_key" ? "API key" : `OAuth client ${c.auth.client_id ?? ""}, secret`} set on <DateOnly at={c.secret_set_at} />
                  {" "}· last checked <Time at={c.checked_at} />
                </div>
                <Capabilities capabilities={c.capabilities} />
              </div>
              <button type="button" disabled={!allowed} onClick={() => setEditing(c)}>Change…</button>
              <ConformanceCheck client={client} disabled={!allowed} tenantId={c.tenant_id} />
            </li>
          ))}
        </ul>
      )}
      {editing === undefined
        ? <button type="button" disabled={!allowed} onClick={() => setEditing("new")}>Connect a tenant…</button>
        : (
          <ConnectionForm
            client={client}
            disabled={!allowed}
            current={editing === "new" ? undefined : editing}
            onDone={() => {
              setEditing(undefined)
              state.reload()
            }}
          />
        )}
      {!allowed && editing === undefined && <ConnectionForm client={client} disabled current={undefined} onDone={() => undefined} />}
    </section>
  )
}
