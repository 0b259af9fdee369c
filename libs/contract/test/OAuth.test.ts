import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { tokenCacheSeconds, TokenResponse } from "../src/OAuth.js"

describe("OAuth 2.0 token response (Authentication rule 3)", () => {
  const decode = Schema.decodeUnknownSync(TokenResponse)

  it("access_token (string), token_type Bearer, expires_in optional", () => {
    expect(decode({ access_token: "abc.def", token_type: "Bearer", expires_in: 3600 })).toEqual({
      access_token: "abc.def",
      token_type: "Bearer",
      expires_in: 3600
    })
    expect(decode({ access_token: "abc", token_type: "Bearer" })).toEqual({ access_token: "abc", token_type: "Bearer" })
  })

  it("token_type must be Bearer (compared case-insensitively, RFC 6749 §5.1)", () => {
    expect(decode({ access_token: "abc", token_type: "bearer" }).token_type).toBe("bearer")
    expect(() => decode({ access_token: "abc", token_type: "MAC" })).toThrow(/token_type must be "Bearer"/)
    expect(() => decode({ access_token: "abc" })).toThrow(/token_type/)
  })

  it("an access token with spaces or control characters is refused", () => {
    expect(() => decode({ access_token: "a b", token_type: "Bearer" })).toThrow(/visible ASCII/)
    expect(() => decode({ access_token: "", token_type: "Bearer" })).toThrow(/visible ASCII/)
  })

  it("Caching: only an expires_in above 30 seconds is cached, for at most five minutes minus a 30-second margin", () => {
    expect(tokenCacheSeconds(undefined)).toBe(0)
    expect(tokenCacheSeconds(30)).toBe(0)
    expect(tokenCacheSeconds(-5)).toBe(0)
    expect(tokenCacheSeconds(31)).toBe(1)
    expect(tokenCacheSeconds(120)).toBe(90)
    expect(tokenCacheSeconds(300)).toBe(270)
    expect(tokenCacheSeconds(86_400)).toBe(270)
  })
})
