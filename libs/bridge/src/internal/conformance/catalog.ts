/**
 * The conformance checks in running order. Each names the contract section
 * and quotes its rule verbatim, and judges one rule only.
 */
import type { Check } from "./check.js"
import { readOnly } from "./readOnlyChecks.js"
import { transportChecks } from "./wireChecks.js"
import { writes } from "./writeChecks.js"


/** Every check in running order, for `transportKind`; write checks are listed whether or not they run. */
export const catalog = (transportKind: string): ReadonlyArray<Check> =>
  [...readOnly(), ...writes(), ...transportChecks()].filter((check) => check.transport === undefined || check.transport === transportKind)
