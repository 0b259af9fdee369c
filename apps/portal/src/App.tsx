/**
 * The Integrations area: the account's own page. It opens the session the
 * single-use link started, then shows four cards — webhook/automation,
 * event destinations, CRM bridge, activity — each loading its own data
 * through the API client.
 */
import { useEffect, useState } from "react"
import { type Client, connect, type PortalApi, run } from "./api.js"
import { ActivityCard } from "./cards/ActivityCard.js"
import { BridgeCard } from "./cards/BridgeCard.js"
import { DestinationsCard } from "./cards/DestinationsCard.js"
import { WebhookCard } from "./cards/WebhookCard.js"

type State =
  | { readonly _tag: "loading" }
  | { readonly _tag: "signedOut"; readonly reason: string }
  | { readonly _tag: "ready"; readonly session: PortalApi.SessionView; readonly client: Client }

const invalidLink = new URLSearchParams(window.location.search).get("link") === "invalid"

export const App = () => {
  const [state, setState] = useState<State>({ _tag: "loading" })

  useEffect(() => {
    // The link's marker is read once; the address bar keeps no trace of it.
    if (window.location.search !== "") window.history.replaceState(null, "", "/")
    void run(connect).then((result) =>
      setState(
        result.ok
          ? { _tag: "ready", ...result.value }
          : {
            _tag: "signedOut",
            reason: invalidLink
              ? "This link has already been used or has expired. Links open once and only for a few minutes: ask for a new one."
              : result.tag === "Unauthorized"
              ? "Your session has ended. Ask for a new link to the Integrations area."
              : result.error
          }
      )
    )
  }, [])

  if (state._tag === "loading") return <main className="page"><p role="status">Loading your integrations…</p></main>
  if (state._tag === "signedOut") {
    return (
      <main className="page">
        <h1>Integrations</h1>
        <p className="error" role="alert" data-testid="signed-out">{state.reason}</p>
      </main>
    )
  }
  const { client, session } = state
  const signOut = () => void run(client.session.logout()).then(() => setState({ _tag: "signedOut", reason: "You are signed out." }))
  return (
    <>
      <header className="top">
        <div>
          <h1>Integrations</h1>
          <p className="hint">
            {session.account.name} · {session.account.mode === "live" ? "live account" : `${session.account.mode} account`}
          </p>
        </div>
        <nav aria-label="Cards">
          <a href="#webhooks">Webhooks</a>
          <a href="#destinations">Destinations</a>
          <a href="#bridge">CRM bridge</a>
          <a href="#activity">Activity</a>
          <button type="button" onClick={signOut}>Sign out</button>
        </nav>
      </header>
      <main className="page">
        <WebhookCard client={client} />
        <DestinationsCard client={client} />
        <BridgeCard client={client} mode={session.account.mode} />
        <ActivityCard client={client} />
      </main>
    </>
  )
}
