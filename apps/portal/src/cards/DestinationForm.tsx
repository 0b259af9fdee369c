/**
 * The form that creates a destination: its kind, a name, the events it
 * receives, and the fields of that kind (the configuration Schemas of the
 * contract's `Destinations`): a webhook's HTTPS URL; a RabbitMQ URL,
 * exchange, routing key, user and password; a NATS URL, subject, optional
 * stream, and a user and password or a token. The server connects and checks
 * it before storing anything; a refusal shows its sentence and next step.
 * Secrets are sent once and cleared from the form.
 */
import { type FormEvent, useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { Status } from "../ui/Status.js"

type Kind = "webhook" | "rabbitmq" | "nats"
type Event = "lead" | "booking" | "all"

interface Values {
  kind: Kind
  name: string
  event: Event
  url: string
  exchange: string
  routingKey: string
  subject: string
  stream: string
  natsAuth: "user" | "token"
  user: string
  password: string
  token: string
}

const initial: Values = {
  kind: "rabbitmq",
  name: "",
  event: "all",
  url: "",
  exchange: "",
  routingKey: "",
  subject: "",
  stream: "",
  natsAuth: "user",
  user: "",
  password: "",
  token: ""
}

/** The kinds as the form names them, and where each URL points. */
const kinds: ReadonlyArray<{ readonly kind: Kind; readonly label: string; readonly url: string; readonly placeholder: string }> = [
  { kind: "rabbitmq", label: "RabbitMQ exchange", url: "RabbitMQ URL", placeholder: "amqps://broker.example.com:5671/vhost" },
  { kind: "nats", label: "NATS JetStream subject", url: "NATS URL", placeholder: "tls://nats.example.com:4222" },
  { kind: "webhook", label: "Webhook (HTTPS)", url: "Webhook URL", placeholder: "https://hooks.example.com/crm-relay" }
]

/** The create request of the contract for these values: only the chosen kind's fields go. */
const request = (v: Values): typeof PortalApi.CreateDestinationRequest.Type => {
  const common = { kind: v.kind, name: v.name.trim(), event: v.event }
  switch (v.kind) {
    case "webhook":
      return { ...common, config: { url: v.url.trim() } }
    case "rabbitmq":
      return {
        ...common,
        config: { url: v.url.trim(), exchange: v.exchange.trim(), routing_key: v.routingKey },
        credentials: { username: v.user.trim(), password: v.password }
      }
    case "nats":
      return {
        ...common,
        config: { url: v.url.trim(), subject: v.subject.trim(), ...(v.stream.trim() === "" ? {} : { stream: v.stream.trim() }) },
        credentials: v.natsAuth === "token" ? { token: v.token } : { user: v.user.trim(), password: v.password }
      }
  }
}

/** One labelled input of the form. */
const Field = (props: {
  readonly id: string
  readonly label: string
  readonly value: string
  readonly onChange: (value: string) => void
  readonly type?: string
  readonly required?: boolean
  readonly placeholder?: string
  readonly hint?: string
}) => (
  <div className="field">
    <label htmlFor={props.id}>{props.label}</label>
    <input
      id={props.id}
      type={props.type ?? "text"}
      required={props.required ?? true}
      autoComplete={props.type === "password" ? "new-password" : "off"}
      value={props.value}
      placeholder={props.placeholder}
      aria-describedby={props.hint === undefined ? undefined : `${props.id}-hint`}
      onChange={(e) => props.onChange(e.target.value)}
    />
    {props.hint !== undefined && <span className="hint" id={`${props.id}-hint`}>{props.hint}</span>}
  </div>
)

export const DestinationForm = ({ client, onCreated }: { readonly client: Client; readonly onCreated: (name: string) => void }) => {
  const [values, setValues] = useState<Values>(initial)
  const [message, setMessage] = useState<{ error?: string; ok?: string }>({})
  const [busy, setBusy] = useState(false)
  const set = <K extends keyof Values>(key: K) => (value: Values[K]) => setValues((v) => ({ ...v, [key]: value }))
  const kind = kinds.find((k) => k.kind === values.kind)!

  const create = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setMessage({ ok: "Connecting to the destination to check it…" })
    void run(client.destinations.create({ payload: request(values) })).then((result) => {
      setBusy(false)
      // Secrets are sent once: cleared whatever the answer, so a retry types them again.
      setValues((v) => ({ ...v, password: "", token: "" }))
      if (!result.ok) return setMessage({ error: `Not created: ${result.error}` })
      setMessage({})
      setValues(initial)
      onCreated(result.value.name)
    })
  }

  return (
    <form onSubmit={create} aria-label="New destination" data-testid="destination-form">
      <fieldset disabled={busy}>
        <legend>Add a destination</legend>
        <div className="field">
          <label htmlFor="d-kind">Kind</label>
          <select id="d-kind" value={values.kind} onChange={(e) => set("kind")(e.target.value as Kind)}>
            {kinds.map((k) => <option key={k.kind} value={k.kind}>{k.label}</option>)}
          </select>
        </div>
        <Field id="d-name" label="Name" value={values.name} onChange={set("name")} placeholder="Our lead queue" />
        <div className="field">
          <label htmlFor="d-event">Events</label>
          <select id="d-event" value={values.event} onChange={(e) => set("event")(e.target.value as Event)}>
            <option value="all">leads and bookings</option>
            <option value="lead">leads only</option>
            <option value="booking">bookings only</option>
          </select>
        </div>
        <Field id="d-url" label={kind.url} value={values.url} onChange={set("url")} placeholder={kind.placeholder} />
        {values.kind === "rabbitmq" && (
          <>
            <Field id="d-exchange" label="Exchange" value={values.exchange} onChange={set("exchange")} hint="It must exist on the broker." />
            <Field id="d-routing-key" label="Routing key" value={values.routingKey} onChange={set("routingKey")} required={false} placeholder="crm.lead" />
            <Field id="d-user" label="User name" value={values.user} onChange={set("user")} />
            <Field id="d-password" label="Password" type="password" value={values.password} onChange={set("password")} />
          </>
        )}
        {values.kind === "nats" && (
          <>
            <Field id="d-subject" label="Subject" value={values.subject} onChange={set("subject")} placeholder="crm.leads" hint="A stream must capture it." />
            <Field id="d-stream" label="Stream (optional)" value={values.stream} onChange={set("stream")} required={false} placeholder="CRM" />
            <div className="field" role="radiogroup" aria-labelledby="d-auth-label">
              <span id="d-auth-label">Sign in with</span>
              <label><input type="radio" name="nats-auth" checked={values.natsAuth === "user"} onChange={() => set("natsAuth")("user")} /> user and password</label>
              <label><input type="radio" name="nats-auth" checked={values.natsAuth === "token"} onChange={() => set("natsAuth")("token")} /> token</label>
            </div>
            {values.natsAuth === "user"
              ? (
                <>
                  <Field id="d-user" label="User name" value={values.user} onChange={set("user")} />
                  <Field id="d-password" label="Password" type="password" value={values.password} onChange={set("password")} />
                </>
              )
              : <Field id="d-token" label="Token" type="password" value={values.token} onChange={set("token")} />}
          </>
        )}
        <p className="hint">
          Credentials are stored sealed and never shown again. Creating the destination connects to it first and checks it: nothing is
          stored if the check fails.
        </p>
        <Status error={message.error} ok={message.ok} />
        <div className="row">
          <button type="submit">Check and create</button>
        </div>
      </fieldset>
    </form>
  )
}
