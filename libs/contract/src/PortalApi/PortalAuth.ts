/**
 * How the Integrations area's API knows who is calling: the session cookie a
 * single-use link set, the CSRF token every change carries, and a rate limit
 * per session. Every group of `PortalApi` is behind this middleware.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, Schema } from "effect"
import { errorObject, RateLimited, Unauthorized } from "../Events.js"

/** The session cookie's name. */
export const SESSION_COOKIE = "crm_relay_portal"

/** The header carrying the CSRF token on every change. */
export const CSRF_HEADER = "x-csrf-token"

/** Where the single-use link lands: it opens the session, sets the cookie and redirects to the page. */
export const ENTER_PATH = "/enter"

/** The account and session a portal request acts for. */
export class CurrentSession extends Context.Tag("@crm-relay/contract/PortalApi/CurrentSession")<
  CurrentSession,
  { readonly sessionId: string; readonly accountId: string }
>() {}

/** 403: a change without the session's CSRF token. */
export class CsrfRefused extends Schema.TaggedError<CsrfRefused>()("CsrfRefused", { error: Schema.String }) {
  static readonly wire = errorObject(this, 403, "A change must carry the session's CSRF token in x-csrf-token; reload the page.", "CsrfError")
}

/** Session cookie + CSRF token on changes + a per-session rate limit. */
export class PortalAuth extends HttpApiMiddleware.Tag<PortalAuth>()("@crm-relay/contract/PortalApi/PortalAuth", {
  failure: Schema.Union(Unauthorized.wire, CsrfRefused.wire, RateLimited.wire),
  provides: CurrentSession,
  security: {
    session: HttpApiSecurity.apiKey({ key: SESSION_COOKIE, in: "cookie" }).pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "The session cookie set by the single-use link (HttpOnly, SameSite=Strict).")
    )
  }
}) {}
