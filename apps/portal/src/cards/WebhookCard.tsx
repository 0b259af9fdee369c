import type { Client } from "../api.js"
import { HooksCard } from "./HooksCard.js"
import { KeysCard } from "./KeysCard.js"
import { SigningSecretCard } from "./SigningSecretCard.js"

/** Card 1: what an automation platform (Zapier and the like) needs — keys, hooks, the signing secret. */
export const WebhookCard = ({ client }: { readonly client: Client }) => (
  <section className="card" id="webhooks" aria-labelledby="webhooks-title" data-card="webhooks">
    <h2 id="webhooks-title">Webhooks and automation</h2>
    <p className="hint">
      Automation platforms use an integration key to subscribe hooks; each lead or booking is then sent to every matching hook, signed.
    </p>
    <KeysCard client={client} />
    <HooksCard client={client} />
    <SigningSecretCard client={client} />
  </section>
)
