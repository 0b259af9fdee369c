/**
 * At most one log line per client address per minute for refusals (refused
 * connections, 429s): a flood must stay visible without flooding the log.
 * Each line that passes says how many were left out before it.
 */

/** Decides, per refusal of `address` at `now`, whether it is logged: the number left out since the last line, or undefined (left out). */
export type RefusalLog = (address: string, now: number) => number | undefined

/** Addresses remembered at most: past it the oldest is forgotten (its next refusal is logged again). */
const MAX_ADDRESSES = 10_000

/** A refusal log letting one line per address through every `windowMillis`. */
export const make = (windowMillis = 60_000): RefusalLog => {
  const seen = new Map<string, { until: number; leftOut: number }>()
  return (address, now) => {
    const entry = seen.get(address)
    if (entry !== undefined && now < entry.until) {
      entry.leftOut++
      return undefined
    }
    seen.delete(address)
    if (seen.size >= MAX_ADDRESSES) seen.delete(seen.keys().next().value!)
    seen.set(address, { until: now + windowMillis, leftOut: 0 })
    return entry?.leftOut ?? 0
  }
}
