/**
 * POST /v1/accounts/{id}/portal-sessions: a single-use link to the account's
 * Integrations area (see PortalSessionsApi).
 */
import { HttpApiBuilder } from "@effect/platform"
import { PortalUnavailable } from "@crm-relay/contract/InternalApi/PortalSessionsApi"
import { Effect, Option } from "effect"
import { InternalApi, unknownAccount } from "@crm-relay/contract/InternalApi"
import { PortalLinks, linkUrl } from "../portal/PortalLinks.js"
import { PortalSessions } from "../portal/PortalSessions.js"

/** Sentences of this group's errors. */
export const messages = {
  unavailable: "This server serves no Integrations area (ROLE=worker) and PORTAL_PUBLIC_URL is unset: no link can be formed."
} as const

/** The handlers (with the PortalSessions service; need PortalLinks and the database). */
export const layer = HttpApiBuilder.group(InternalApi, "portalSessions", (handlers) =>
  Effect.gen(function*() {
    const sessions = yield* PortalSessions
    const links = yield* PortalLinks
    return handlers.handle("create", ({ path }) =>
      Effect.gen(function*() {
        if (Option.isNone(links.baseUrl)) return yield* new PortalUnavailable({ error: messages.unavailable })
        const minted = yield* sessions.mint(path.id).pipe(Effect.catchTag("UnknownAccount", unknownAccount))
        return { url: linkUrl(links.baseUrl.value, minted.token), expires_at: minted.expiresAt.toISOString() }
      }))
  }))
