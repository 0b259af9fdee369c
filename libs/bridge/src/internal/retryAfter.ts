/**
 * Reads a Retry-After header (RFC 9110 §10.2.3): delta-seconds or an
 * HTTP-date, bounded to five minutes (Limits). Anything unreadable is ignored.
 */
import { Duration, Option } from "effect"
import { boundRetryAfter } from "../BridgeError.js"

const DELTA_SECONDS = /^\d{1,10}$/

/** The wait a Retry-After value asks for at `nowMillis`, bounded to [0, 5 minutes]. */
export const parseRetryAfter = (value: string | undefined, nowMillis: number): Option.Option<Duration.Duration> => {
  if (value === undefined) return Option.none()
  const text = value.trim()
  if (DELTA_SECONDS.test(text)) return Option.some(boundRetryAfter(Duration.seconds(Number(text))))
  const at = Date.parse(text)
  return Number.isNaN(at) || !/[A-Za-z]/.test(text)
    ? Option.none()
    : Option.some(boundRetryAfter(Duration.millis(at - nowMillis)))
}
