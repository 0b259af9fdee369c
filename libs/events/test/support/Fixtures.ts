/**
 * Shared data of the Event API tests: a live account that can subscribe
 * receivers, the sample contact, and a lead event for the fan-out.
 */
import { Events } from "@crm-relay/contract"
import { Effect, Option } from "effect"
import { Accounts } from "../../src/Accounts.js"
import type * as Fanout from "../../src/Fanout.js"
import { IntegrationKeys } from "../../src/IntegrationKeys.js"
import { Subscriptions } from "../../src/Subscriptions.js"

/** A live account with an integration key, and a way to subscribe receivers. */
export const account = (name = "Acme") =>
  Effect.gen(function*() {
    const created = yield* (yield* Accounts).create({ name, mode: "live" })
    const key = yield* (yield* IntegrationKeys).create(created.id)
    const subscriptions = yield* Subscriptions
    return {
      id: created.id,
      subscribe: (targetUrl: string, event = "lead") =>
        subscriptions.create({ accountId: created.id, keyId: key.id, targetUrl, event })
    }
  })

/** The caller of the sample events. */
export const contact: Events.EventContact = {
  external_id: "crm-contact-7",
  full_name: "Ada Lovelace",
  first_name: "Ada",
  last_name: "Lovelace",
  phones: ["+1 555 0100"],
  emails: ["ada@example.com"],
  address: "1 Analytical Way"
}

/** A lead event of call `callId` for `accountId`. */
export const leadEvent = (accountId: string, callId: string, caller: Events.EventContact = contact): Fanout.EventInput => ({
  accountId,
  callId,
  source: "Receptionist (phone)",
  contact: caller,
  jobType: "Boiler repair",
  summary: "No hot water",
  appointment: Option.none()
})
