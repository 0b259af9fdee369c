/**
 * OAuth 2.0 client credentials toward a bridge (Authentication rule 3).
 */
import { Schema } from "effect"

/** The token endpoint's answer: a Bearer access token with an optional lifetime in seconds. */
export const TokenResponse = Schema.Struct({
  access_token: Schema.String.pipe(
    Schema.pattern(/^[\x21-\x7E]+$/, { message: () => "access_token must be visible ASCII without spaces" })
  ),
  token_type: Schema.String.pipe(
    // RFC 6749 §5.1: the token type value is case-insensitive.
    Schema.filter((t) => t.toLowerCase() === "bearer" || `token_type must be "Bearer", got ${JSON.stringify(t)}`, {
      arbitrary: () => (fc) => fc.constantFrom("Bearer", "bearer", "BEARER")
    })
  ),
  expires_in: Schema.optionalWith(
    Schema.Number.pipe(Schema.finite()).annotations({
      // JSON has one zero: -0 is not a wire value.
      arbitrary: () => (fc) => fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => n === 0 ? 0 : n)
    }),
    { exact: true }
  )
}).annotations({ identifier: "TokenResponse" })
export type TokenResponse = typeof TokenResponse.Type

/** Only an `expires_in` above this many seconds is cached. */
export const TOKEN_CACHE_MIN_LIFETIME_SECONDS = 30
/** A cached token is kept at most this long, before the safety margin. */
export const TOKEN_CACHE_MAX_SECONDS = 300
/** Seconds subtracted from the cache lifetime as a safety margin. */
export const TOKEN_CACHE_MARGIN_SECONDS = 30

/**
 * How long a token may be cached, in seconds: `min(expires_in, 300) - 30`
 * when `expires_in > 30`, otherwise 0 (fetch a fresh grant next time).
 */
export const tokenCacheSeconds = (expiresIn: number | undefined): number =>
  expiresIn === undefined || !(expiresIn > TOKEN_CACHE_MIN_LIFETIME_SECONDS)
    ? 0
    : Math.min(expiresIn, TOKEN_CACHE_MAX_SECONDS) - TOKEN_CACHE_MARGIN_SECONDS
