/**
 * The webhook receiver of a delivery benchmark: HTTPS on 127.0.0.1 (the
 * caller's certificate), answering 200 at once and noting each call's first
 * delivery and any webhook-id received twice.
 */
import type { Certificate } from "@crm-relay/testing"
import { Effect } from "effect"
import { listen, readBody } from "./HttpsListener.js"

/**
 * First arrival time (performance.now()) per call id, how many requests carried an already-seen
 * webhook-id, and how many TLS connections were opened (a sender that keeps connections alive opens
 * few; one per request would mean a handshake per delivery). For a call fanned out to several
 * subscriptions: how many distinct webhook-ids arrived for it, and when the latest of them did.
 */
export interface Arrivals {
  readonly byCall: Map<string, number>
  readonly distinctByCall: Map<string, number>
  readonly lastByCall: Map<string, number>
  readonly webhookIds: Set<string>
  duplicates: number
  total: number
  connections: number
}

/** The receiver for the scope: its arrivals and the subscription URL that reaches it. */
export const startReceiver = (tls: Certificate.TlsMaterial) =>
  Effect.gen(function*() {
    const arrivals: Arrivals = {
      byCall: new Map(),
      distinctByCall: new Map(),
      lastByCall: new Map(),
      webhookIds: new Set(),
      duplicates: 0,
      total: 0,
      connections: 0
    }
    const listener = yield* listen(tls, (request, response) =>
      readBody(request, (body) => {
        const at = performance.now()
        arrivals.total++
        const id = String(request.headers["webhook-id"] ?? "")
        const seen = arrivals.webhookIds.has(id)
        if (seen) arrivals.duplicates++
        arrivals.webhookIds.add(id)
        const callId = (JSON.parse(body) as { call_id: string }).call_id
        if (!arrivals.byCall.has(callId)) arrivals.byCall.set(callId, at)
        if (!seen) {
          arrivals.distinctByCall.set(callId, (arrivals.distinctByCall.get(callId) ?? 0) + 1)
          arrivals.lastByCall.set(callId, at)
        }
        response.writeHead(200, { "content-type": "application/json" })
        response.end("{}")
      }), () => {
      arrivals.connections++
    })
    return { arrivals, url: `https://127.0.0.1:${listener.port}/hooks/bench?source=bench` }
  })

/** The `p`-th percentile of ascending `sorted` (NaN when empty). */
export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

/** A call outcome of `accountId` classified as a lead: one delivery per lead subscription, a CRM push to `tenantId`'s bridge. */
export const leadOutcome = (accountId: string, tenantId = "bench-tenant"): Record<string, unknown> => ({
  account_id: accountId,
  tenant_id: tenantId,
  classification: "lead",
  source: "Bench Receptionist (phone)",
  tags: ["bench"],
  caller: {
    full_name: "Ada Lovelace",
    first_name: "Ada",
    last_name: "Lovelace",
    phones: ["+1 555 0100"],
    emails: ["ada@example.com"],
    address: "1 Analytical Way",
    postal_code: "02139"
  },
  lead: { job_type: "Boiler repair", summary: "No hot water since Monday", notes: "Side door.", urgency: "high" }
})
