/**
 * The connection form of one client tenant: transport (REST or MCP), URL and
 * one credential (an API key, or OAuth client credentials). "Test connection"
 * runs the capabilities check only and shows what the bridge advertised or
 * why it failed; "Save" is offered only after a passing check of exactly
 * these values (the server checks again before it stores anything).
 */
import { type FormEvent, useState } from "react"
import { Redacted } from "effect"
import { type Client, type PortalApi, run } from "../api.js"
import { Status } from "../ui/Status.js"
import { Capabilities } from "./Capabilities.js"

interface Values {
  tenant: string
  transport: "rest" | "mcp"
  url: string
  authType: "api_key" | "oauth"
  key: string
  tokenUrl: string
  clientId: string
  clientSecret: string
  scope: string
}

const initial = (current: PortalApi.ConnectionView | undefined): Values => ({
  tenant: current?.tenant_id ?? "",
  transport: current?.transport === "mcp" ? "mcp" : "rest",
  url: current?.url ?? "",
  authType: current?.auth.type ?? "api_key",
  key: "",
  tokenUrl: current?.auth.token_url ?? "",
  clientId: current?.auth.client_id ?? "",
  clientSecret: "",
  scope: current?.auth.scope ?? ""
})

const form = (v: Values): PortalApi.ConnectionForm => ({
  transport: v.transport,
  url: v.url.trim(),
  auth: v.authType === "api_key"
    ? { type: "api_key", key: Redacted.make(v.key) }
    : {
      type: "oauth",
      token_url: v.tokenUrl.trim(),
      client_id: v.clientId.trim(),
      client_secret: Redacted.make(v.clientSecret),
      ...(v.scope.trim() === "" ? {} : { scope: v.scope.trim() })
    }
})

export const ConnectionForm = (props: {
  readonly client: Client
  readonly disabled: boolean
  readonly current: PortalApi.ConnectionView | undefined
  readonly onDone: () => void
}) => {
  const { client, current, disabled } = props
  const [values, setValues] = useState<Values>(() => initial(current))
  const [passed, setPassed] = useState<{ readonly values: string; readonly capabilities: PortalApi.ConnectionView["capabilities"] } | undefined>(undefined)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const [busy, setBusy] = useState(false)
  const set = <K extends keyof Values>(key: K) => (value: Values[K]) => setValues((v) => ({ ...v, [key]: value }))
  const fingerprint = JSON.stringify(values)
  const canSave = passed !== undefined && passed.values === fingerprint

  const test = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setMessage({ ok: "Testing the connection…" })
    void run(client.connections.test({ path: { tenantId: values.tenant.trim() }, payload: form(values) })).then((result) => {
      setBusy(false)
      if (!result.ok) {
        setPassed(undefined)
        return setMessage({ error: result.error })
      }
      setPassed({ values: fingerprint, capabilities: result.value.capabilities })
      setMessage({ ok: "The check passed. Save to use this connection." })
    })
  }
  const save = () => {
    setBusy(true)
    void run(client.connections.save({ path: { tenantId: values.tenant.trim() }, payload: form(values) })).then((result) => {
      setBusy(false)
      if (!result.ok) return setMessage({ error: result.error })
      props.onDone()
    })
  }

  return (
    <form className="connection" onSubmit={test} aria-label="Connection form" data-testid="connection-form">
      <fieldset disabled={disabled || busy}>
        <legend>{current === undefined ? "Connect a tenant" : `Change tenant ${current.tenant_id}`}</legend>
        <div className="field">
          <label htmlFor="c-tenant">Tenant ID</label>
          <input id="c-tenant" required value={values.tenant} readOnly={current !== undefined} onChange={(e) => set("tenant")(e.target.value)} />
        </div>
        <div className="field" role="radiogroup" aria-labelledby="c-transport-label">
          <span id="c-transport-label">Transport</span>
          <label><input type="radio" name="transport" checked={values.transport === "rest"} onChange={() => set("transport")("rest")} /> REST</label>
          <label><input type="radio" name="transport" checked={values.transport === "mcp"} onChange={() => set("transport")("mcp")} /> MCP</label>
        </div>
        <div className="field">
          <label htmlFor="c-url">{values.transport === "rest" ? "Bridge base URL" : "MCP URL"}</label>
          <input id="c-url" type="url" required value={values.url} placeholder="https://bridge.example.com/crm" onChange={(e) => set("url")(e.target.value)} />
        </div>
        <div className="field" role="radiogroup" aria-labelledby="c-auth-label">
          <span id="c-auth-label">Credential</span>
          <label><input type="radio" name="auth" checked={values.authType === "api_key"} onChange={() => set("authType")("api_key")} /> API key</label>
          <label><input type="radio" name="auth" checked={values.authType === "oauth"} onChange={() => set("authType")("oauth")} /> OAuth client credentials</label>
        </div>
        {values.authType === "api_key"
          ? (
            <div className="field">
              <label htmlFor="c-key">API key</label>
              <input id="c-key" type="password" autoComplete="off" required value={values.key} placeholder={current === undefined ? "" : "set: enter a new one to change it"} onChange={(e) => set("key")(e.target.value)} />
            </div>
          )
          : (
            <>
              <div className="field">
                <label htmlFor="c-token-url">Token URL</label>
                <input id="c-token-url" type="url" required value={values.tokenUrl} onChange={(e) => set("tokenUrl")(e.target.value)} />
              </div>
              <div className="field">
                <label htmlFor="c-client-id">Client ID</label>
                <input id="c-client-id" required value={values.clientId} onChange={(e) => set("clientId")(e.target.value)} />
              </div>
              <div className="field">
                <label htmlFor="c-client-secret">Client secret</label>
                <input id="c-client-secret" type="password" autoComplete="off" required value={values.clientSecret} onChange={(e) => set("clientSecret")(e.target.value)} />
              </div>
              <div className="field">
                <label htmlFor="c-scope">Scope (optional)</label>
                <input id="c-scope" value={values.scope} onChange={(e) => set("scope")(e.target.value)} />
              </div>
            </>
          )}
        <Status error={message.error} ok={message.ok} />
        {canSave && passed !== undefined && <Capabilities capabilities={passed.capabilities} />}
        <div className="row">
          <button type="submit">Test connection</button>
          <button type="button" onClick={save} disabled={!canSave}>Save</button>
          {!disabled && <button type="button" onClick={props.onDone}>Cancel</button>}
        </div>
      </fieldset>
    </form>
  )
}
