/**
 * Turns an address-policy verdict into the refusal egress reports.
 */
import * as AddressPolicy from "../../AddressPolicy.js"
import { EgressRefused } from "./EgressError.js"

/** The refusal for `address` of `host`, or `undefined` when the policy permits it. */
export const addressRefusal = (
  policy: AddressPolicy.AddressPolicy,
  host: string,
  address: string
): EgressRefused | undefined => {
  const verdict = policy.check(address)
  switch (verdict._tag) {
    case "Public":
    case "AllowedPrivate":
      return undefined
    case "Blocked":
      return new EgressRefused({
        reason: "private_address",
        host,
        address,
        range: `${verdict.range.name} range ${verdict.range.cidr}`
      })
    case "Invalid":
      return new EgressRefused({ reason: "private_address", host, address })
  }
}
