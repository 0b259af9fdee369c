/**
 * Egress settings read from the environment through `Config`.
 */
import { Config, ConfigError, Either } from "effect"
import * as AddressPolicy from "./AddressPolicy.js"

/**
 * `EGRESS_ALLOW_PRIVATE`: comma-separated CIDRs egress may reach although they
 * are not public (tests and the demo only). Unset means none.
 */
export const allowPrivate: Config.Config<ReadonlyArray<AddressPolicy.Cidr>> = Config.string("EGRESS_ALLOW_PRIVATE").pipe(
  Config.withDescription(
    "Comma-separated CIDRs (e.g. 127.0.0.1/32,::1/128) that egress may reach despite being private; development and tests only, logged as a warning."
  ),
  Config.mapOrFail((text) =>
    Either.mapLeft(AddressPolicy.parseCidrList(text), (problem) => ConfigError.InvalidData([], `EGRESS_ALLOW_PRIVATE: ${problem}.`))
  ),
  Config.withDefault<ReadonlyArray<AddressPolicy.Cidr>>([])
)
