/**
 * The closed error union crosses storage: every error encodes to JSON and
 * decodes back to the same value, and a stored Retry-After beyond five
 * minutes is refused (Limits: Retry-After honored up to 5 minutes).
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Either, Option, Schema } from "effect"
import { Auth, BridgeError, Conflict, MAX_RETRY_AFTER, Permanent, transient } from "../src/BridgeError.js"

const encode = Schema.encodeSync(BridgeError)
const decode = Schema.decodeUnknownEither(BridgeError)

describe("BridgeError", () => {
  const errors = [
    new Conflict({ operation: "appointments.create", status: 409, message: "The bridge answered 409." }),
    transient({ operation: "leads.create", status: 429, message: "The bridge answered 429.", retryAfter: Duration.seconds(7) }),
    transient({ operation: "leads.create", status: null, message: "The connection failed." }),
    new Auth({ operation: "capabilities", status: 401, message: "The bridge refused the credential (401)." }),
    new Permanent({ operation: "contacts.upsert", status: 200, kind: "invalid_receipt", message: "Not a receipt." })
  ]

  for (const error of errors) {
    it(`${error._tag} round-trips through JSON for storage`, () => {
      const json = JSON.parse(JSON.stringify(encode(error)))
      const back = decode(json)
      expect(Either.isRight(back)).toBe(true)
      expect(Either.getOrThrow(back)).toEqual(error)
      expect(Either.getOrThrow(back)).toBeInstanceOf(error.constructor)
    })
  }

  it("Limits: Retry-After honored up to 5 minutes — the constructor bounds it, and a stored larger value is refused", () => {
    const asked = transient({ operation: "leads.create", status: 503, message: "503", retryAfter: Duration.hours(2) })
    expect(Option.map(asked.retryAfter, Duration.toMillis)).toEqual(Option.some(Duration.toMillis(MAX_RETRY_AFTER)))
    const stored = { _tag: "Transient", operation: "leads.create", status: 503, message: "503", retryAfter: 3_600_000 }
    expect(Either.isLeft(decode(stored))).toBe(true)
  })

  it("Errors: the union is closed — an unknown tag or operation is refused", () => {
    expect(Either.isLeft(decode({ _tag: "Timeout", operation: "leads.create", status: null, message: "x" }))).toBe(true)
    expect(Either.isLeft(decode({ _tag: "Auth", operation: "contacts.delete", status: 401, message: "x" }))).toBe(true)
  })
})
