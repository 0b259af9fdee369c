/**
 * Where the Integrations area's links point: PORTAL_PUBLIC_URL when set
 * (the address customers reach through the operator's HTTPS proxy), else
 * this process's own portal listener.
 */
import { PortalApi } from "@crm-relay/contract"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { PortalAddress } from "../Addresses.js"

/** The base URL links are minted under; none when neither is known. */
export class PortalLinks extends Context.Tag("@crm-relay/server/PortalLinks")<
  PortalLinks,
  { readonly baseUrl: Option.Option<string> }
>() {}

/** The links of `publicUrl`, or of the PortalAddress in the context. */
export const layer = (publicUrl: Option.Option<string>): Layer.Layer<PortalLinks> =>
  Layer.effect(
    PortalLinks,
    Effect.map(Effect.serviceOption(PortalAddress), (address) => ({
      baseUrl: Option.orElse(publicUrl, () => Option.map(address, (a) => a.url))
    }))
  )

/** The URL that opens a session with `token`. */
export const linkUrl = (baseUrl: string, token: Redacted.Redacted<string>): string =>
  `${baseUrl}${PortalApi.ENTER_PATH}?token=${encodeURIComponent(Redacted.value(token))}`
