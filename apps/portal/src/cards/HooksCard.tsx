/**
 * Hooks: every subscription of the account (target, event, created, which
 * key made it, where it stands), add one by hand, remove one, send a test
 * event to one and watch its delivery's result appear; disable or enable
 * one in one click, recover what it missed; and the hooks removed lately.
 */
import { type FormEvent, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { HookState } from "./HookState.js"
import { RecoverForm } from "./RecoverForm.js"
import { RemovedHooks } from "./RemovedHooks.js"
import { TestResult } from "./TestResult.js"
import { Status } from "../ui/Status.js"
import { Time } from "../ui/Time.js"
import { useLoad } from "../ui/useLoad.js"

const keyName = (hook: PortalApi.HookView) =>
  hook.created_by_key === null
    ? "added in this page"
    : `key ${hook.created_by_key.label ?? ""} ${hook.created_by_key.last_four === null ? "" : `(…${hook.created_by_key.last_four})`}`.replace(/\s+/g, " ")

export const HooksCard = ({ client }: { readonly client: Client }) => {
  // Refreshed like the activity: a hook the receiver ends (410 Gone) or that is disabled shows without a reload.
  const hooks = useLoad(() => run(client.hooks.list()), [client], 3000)
  const [target, setTarget] = useState("")
  const [event, setEvent] = useState<"lead" | "booking" | "all">("lead")
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const [tests, setTests] = useState<Record<string, string>>({})
  const [recovering, setRecovering] = useState<string | undefined>(undefined)

  const add = (e: FormEvent) => {
    e.preventDefault()
    void run(client.hooks.create({ payload: { target_url: target, event } })).then((result) => {
      if (!result.ok) return setMessage({ error: result.error })
      setTarget("")
      setMessage({ ok: "Hook added. Send it a test event to check the receiver." })
      hooks.reload()
    })
  }
  const remove = (id: string) =>
    void run(client.hooks.remove({ path: { id } })).then((result) => {
      setMessage(result.ok ? { ok: "Hook removed." } : { error: result.error })
      hooks.reload()
    })
  const toggle = (hook: PortalApi.HookView) =>
    void run(
      hook.state === "disabled" ? client.hooks.enable({ path: { id: hook.id } }) : client.hooks.disable({ path: { id: hook.id } })
    ).then((result) => {
      setMessage(
        !result.ok
          ? { error: result.error }
          : result.value.outcome === "enabled" || result.value.outcome === "already_enabled"
          ? { ok: "Hook enabled: new events are sent to it again. Recover to send what it missed." }
          : { ok: "Hook disabled: no events are sent to it until you enable it." }
      )
      hooks.reload()
    })
  const test = (id: string) =>
    void run(client.hooks.test({ path: { id } })).then((result) => {
      if (!result.ok) return setMessage({ error: result.error })
      setMessage({})
      setTests((current) => ({ ...current, [id]: result.value.delivery_id }))
    })

  return (
    <div className="part" data-card="hooks">
      <h3>Hooks</h3>
      <p className="hint">
        Every subscription of this account. After a platform lost a subscribe answer, check here before subscribing again: a repeat
        creates a duplicate hook.
      </p>
      {hooks.data !== undefined && (
        <p className="hint" data-testid="hook-usage">
          {hooks.data.count} of {hooks.data.limit} hooks{hooks.data.count >= hooks.data.limit ? ": remove one before adding another." : ""}
        </p>
      )}
      <Status error={message.error ?? hooks.error} ok={message.ok} />
      {hooks.data !== undefined && hooks.data.hooks.length === 0 && <p className="empty">No hooks yet.</p>}
      {hooks.data !== undefined && hooks.data.hooks.length > 0 && (
        <ul className="list">
          {hooks.data.hooks.map((hook) => (
            <li key={hook.id} data-testid="hook-row">
              <div className="grow">
                <code className="url">{hook.target_url}</code>
                <div className="hint">
                  {hook.event} events · created <Time at={hook.created_at} /> · {keyName(hook)}
                </div>
                <HookState hook={hook} />
                {tests[hook.id] !== undefined && <TestResult client={client} deliveryId={tests[hook.id]!} />}
              </div>
              <button type="button" onClick={() => test(hook.id)}>Send test event</button>
              <button type="button" onClick={() => toggle(hook)}>{hook.state === "disabled" ? "Enable" : "Disable"}</button>
              <button type="button" aria-expanded={recovering === hook.id} onClick={() => setRecovering(recovering === hook.id ? undefined : hook.id)}>
                {recovering === hook.id ? "Close recover" : "Recover…"}
              </button>
              <button type="button" className="danger" onClick={() => remove(hook.id)} aria-label={`Remove hook ${hook.target_url}`}>Remove</button>
              {recovering === hook.id && <RecoverForm client={client} hook={hook} />}
            </li>
          ))}
        </ul>
      )}
      {hooks.data !== undefined && <RemovedHooks removed={hooks.data.removed} />}
      <form onSubmit={add} className="row">
        <label htmlFor="hook-url">Receiver URL</label>
        <input id="hook-url" type="url" required value={target} placeholder="https://hooks.example.com/…" onChange={(e) => setTarget(e.target.value)} />
        <label htmlFor="hook-event">Event</label>
        <select id="hook-event" value={event} onChange={(e) => setEvent(e.target.value as "lead" | "booking" | "all")}>
          <option value="lead">lead</option>
          <option value="booking">booking</option>
          <option value="all">all</option>
        </select>
        <button type="submit">Add hook</button>
      </form>
    </div>
  )
}
