/**
 * Where a running server's APIs listen.
 */
import { Context } from "effect"
import type { Address } from "./serveApi.js"

export type { Address } from "./serveApi.js"

/** The public Event API's address. */
export class PublicAddress extends Context.Tag("@crm-relay/server/PublicAddress")<PublicAddress, Address>() {}

/** The Integrations area's address (its own listener). */
export class PortalAddress extends Context.Tag("@crm-relay/server/PortalAddress")<PortalAddress, Address>() {}

/** The internal API's address. */
export class AdminAddress extends Context.Tag("@crm-relay/server/AdminAddress")<AdminAddress, Address>() {}
