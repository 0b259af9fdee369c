/** The workflows the tests import into n8n, as its editor would save them. */
import { randomUUID } from "node:crypto"
import { TYPES } from "./N8nServer.mjs"

const credential = (id: string) => ({ crmRelayApi: { id, name: "crm-relay" } })

/** CRM Relay Trigger on `event`, its items into a No-Op node; `webhookId` names its webhook path. */
export const triggerWorkflow = (options: { readonly credentialId: string; readonly event: "lead" | "booking"; readonly webhookId: string; readonly name: string }) => ({
  name: options.name,
  nodes: [
    {
      id: randomUUID(),
      name: "CRM Relay Trigger",
      type: TYPES.trigger,
      typeVersion: 1,
      position: [0, 0],
      webhookId: options.webhookId,
      parameters: { event: options.event },
      credentials: credential(options.credentialId)
    },
    {
      id: randomUUID(),
      name: "Take the lead",
      type: "n8n-nodes-base.noOp",
      typeVersion: 1,
      position: [280, 0],
      parameters: {}
    }
  ],
  connections: { "CRM Relay Trigger": { main: [[{ node: "Take the lead", type: "main", index: 0 }]] } },
  settings: { executionOrder: "v1" }
})

/**
 * A GET webhook at `path` answering with every item of CRM Relay's "Get recent records" (the
 * query's `max` as Max Records, `onlyBooked=true` for Only Booked): the action node run by n8n.
 */
export const recentRecordsWorkflow = (options: { readonly credentialId: string; readonly path: string }) => ({
  name: "Recent crm-relay records",
  nodes: [
    {
      id: randomUUID(),
      name: "Webhook",
      type: "n8n-nodes-base.webhook",
      typeVersion: 2,
      position: [0, 0],
      webhookId: randomUUID(),
      parameters: { httpMethod: "GET", path: options.path, responseMode: "lastNode", responseData: "allEntries", options: {} }
    },
    {
      id: randomUUID(),
      name: "CRM Relay",
      type: TYPES.action,
      typeVersion: 1,
      position: [280, 0],
      parameters: {
        resource: "record",
        operation: "getRecent",
        maxRecords: "={{ Number($json.query.max) }}",
        onlyBooked: "={{ $json.query.onlyBooked === 'true' }}"
      },
      credentials: credential(options.credentialId)
    }
  ],
  connections: { Webhook: { main: [[{ node: "CRM Relay", type: "main", index: 0 }]] } },
  settings: { executionOrder: "v1" }
})
