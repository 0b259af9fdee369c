/**
 * The `webhooks` section of the Event API's OpenAPI 3.1 document: what a
 * receiver gets (the lead and booking deliveries, signed per Standard
 * Webhooks) and what each of its answers does.
 */
import { JSONSchema } from "effect"
import * as Events from "../Events.js"

type Spec = Record<string, any>

const header = (name: string, description: string, example: string) => ({
  name,
  in: "header",
  required: true,
  description,
  schema: { type: "string" },
  example
})

const signatureHeaders = [
  header(
    "webhook-id",
    "The delivery id (also the payload's `id`): the same on every retry and replay of this delivery; drop a repeat you already processed.",
    "0b6c2f3e-3c7a-4c59-9d7e-2f1f0e3a9b11"
  ),
  header(
    "webhook-timestamp",
    "Unix time in seconds when this attempt was signed; refuse attempts too far from your clock (e.g. 5 minutes) against replays.",
    "1767225600"
  ),
  header(
    "webhook-signature",
    "Space-separated `v1,<base64 HMAC-SHA256>` signatures of `<webhook-id>.<webhook-timestamp>.<body>` under the account's signing secret (`whsec_…`, base64 after the prefix); accept if any matches.",
    "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="
  )
]

const responses = {
  "2XX": { description: "Delivered: any 2xx, whatever the body (it is not read). Acknowledge quickly, once the event is safely stored." },
  "410": {
    description: "Gone: the subscription is removed at once (as `DELETE /subscribe/{id}` would) and its pending deliveries end; nothing more is sent to it."
  },
  "429": {
    description: "Too many requests: retried no sooner than `Retry-After` (seconds or an HTTP date, honoured up to 10 hours) and at least 60 s later.",
    headers: { "Retry-After": { schema: { type: "string" }, description: "When to try again." } }
  },
  default: {
    description: "Any other answer (3xx is not followed, 4xx, 5xx), a timeout after 10 s or a network error: retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (±20 %), then failed (replayable). A non-2xx answer carrying `webhook-delivery: abort-message` ends that one message instead: no retry. A subscription whose every attempt fails for days is disabled until re-enabled.",
    headers: {
      "webhook-delivery": {
        schema: { type: "string", enum: ["abort-message"] },
        description: "Optional: `abort-message` ends this message's retries."
      }
    }
  }
}

const operation = (kind: "lead" | "booking", summary: string, schema: string) => ({
  post: {
    operationId: `${kind}Delivery`,
    summary,
    description:
      `Sent to the targetUrl of every subscription whose event is \`${kind}\` or \`all\`, as one JSON POST per subscription. Delivery is at least once and unordered; de-duplicate on \`webhook-id\`.`,
    parameters: signatureHeaders,
    requestBody: { required: true, content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` } } } },
    responses
  }
})

/** `spec` with the `webhooks` section and the delivered events' schemas under `components.schemas`. */
export const withWebhooks = <T extends object>(spec: T): T => {
  const copy: Spec = structuredClone(spec)
  const definitions: Record<string, any> = {}
  for (const schema of [Events.LeadEvent, Events.BookingEvent]) {
    JSONSchema.fromAST(schema.ast, { definitions, definitionPath: "#/components/schemas/", target: "openApi3.1" })
  }
  copy["components"] = { ...copy["components"], schemas: { ...copy["components"]?.["schemas"], ...definitions } }
  copy["webhooks"] = {
    lead: operation("lead", "A captured lead (event `lead`)", "LeadEvent"),
    booking: operation("booking", "A booked or requested appointment (event `booking`)", "BookingEvent")
  }
  return copy as T
}
