/**
 * The operator's way into an account's Integrations area, on the internal
 * API: `POST /v1/accounts/{id}/portal-sessions` mints a single-use link
 * (valid a few minutes) that opens a session for that one account. The
 * embedding service vouches for its user; there are no passwords. The
 * group gets the admin-token middleware where the internal API adds it.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { errorObject, NotFound } from "../Events.js"

/** The minted link: open it once, before `expires_at`. */
export const PortalLink = Schema.Struct({
  url: Schema.String,
  expires_at: Schema.String
}).annotations({ identifier: "PortalLink" })
export type PortalLink = typeof PortalLink.Type

/** 503: this replica serves no Integrations area and PORTAL_PUBLIC_URL is unset, so no link can be formed. */
export class PortalUnavailable extends Schema.TaggedError<PortalUnavailable>()("PortalUnavailable", { error: Schema.String }) {
  static readonly wire = errorObject(this, 503, "No Integrations area is served here; set PORTAL_PUBLIC_URL or use a replica that serves it.", "PortalUnavailableError")
}

/** Single-use links to an account's Integrations area. */
export class PortalSessionsGroup extends HttpApiGroup.make("portalSessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/accounts/:id/portal-sessions")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(PortalLink, { status: 201 })
      .addError(NotFound.wire)
      .addError(PortalUnavailable.wire)
      .annotate(OpenApi.Summary, "Mint a single-use link to the account's Integrations area")
  )
  .annotate(OpenApi.Description, "Single-use links to an account's Integrations area.")
{}
