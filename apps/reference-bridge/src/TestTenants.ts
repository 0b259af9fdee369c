/**
 * The two tenants the test harnesses of crm-relay share, and a reference
 * bridge serving them: t-1 has an API key and an OAuth client (tokens for an
 * hour), t-2 only an API key. The secrets hold characters that must survive
 * encoding (`~`, `&`).
 */
import type { Layer } from "effect"
import * as ReferenceBridge from "./ReferenceBridge.js"

/** t-1: an API key and an OAuth client. */
export const TENANT = {
  tenantId: "t-1",
  apiKey: "key-1_visible~ASCII-secret",
  clientId: "client-one",
  clientSecret: "client-secret-one&two"
} as const

/** t-2: an API key only. */
export const OTHER = { tenantId: "t-2", apiKey: "key-2-secret" } as const

/** The reference bridge on `urlHost` serving {@link TENANT} and {@link OTHER}. */
export const layer = (
  urlHost: string
): Layer.Layer<ReferenceBridge.ReferenceBridge, ReferenceBridge.ReferenceBridgeError> =>
  ReferenceBridge.layer({
    urlHost,
    tenants: [
      {
        tenantId: TENANT.tenantId,
        apiKey: TENANT.apiKey,
        oauth: { clientId: TENANT.clientId, clientSecret: TENANT.clientSecret, expiresIn: 3600 }
      },
      { tenantId: OTHER.tenantId, apiKey: OTHER.apiKey }
    ]
  })
