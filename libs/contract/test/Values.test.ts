import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { describeParseError } from "../src/Validation.js"
import {
  IdempotencyKey,
  Instant,
  instantToUtc,
  JsonRpcId,
  NonBlankString,
  parseInstant,
  sameInstant,
  TimeZone
} from "../src/Values.js"

/** The readable refusal of `schema` for `input`, or "accepted". */
const refusal = <A, I>(schema: Schema.Schema<A, I>, input: unknown): string =>
  Either.match(Schema.decodeUnknownEither(schema)(input), {
    onLeft: describeParseError,
    onRight: () => "accepted"
  })

describe("Instant", () => {
  it.each([
    "2026-03-02T09:00:00-05:00",
    "2026-03-02T14:00:00Z",
    "2026-03-02T14:00Z",
    "2026-03-02T14:00:00.123456789+05:30",
    "2024-02-29T00:00:00+00:00"
  ])("Operation rule 8: the offset-aware ISO 8601 instant %s is accepted", (text) => {
    expect(refusal(Instant, text)).toBe("accepted")
  })

  it.each([
    ["2026-03-02T09:00:00", "no offset"],
    ["2026-03-02 09:00:00Z", "space instead of T"],
    ["2026-03-02", "a date alone"],
    ["2026-02-29T09:00:00Z", "Feb 29 of a common year"],
    ["2026-13-01T09:00:00Z", "month 13"],
    ["2026-03-02T24:00:00Z", "hour 24"],
    ["2026-03-02T09:00:60Z", "second 60"],
    ["2026-03-02T09:00:00+0500", "offset without colon"],
    ["1772463600", "epoch seconds"]
  ])("Operation rule 8: %s (%s) is refused with a readable message", (text) => {
    expect(refusal(Instant, text)).toMatch(/expected an ISO 8601 instant with an explicit UTC offset/)
  })

  it("a timestamp without an offset is refused, and the message quotes it", () => {
    expect(refusal(Instant, "2026-03-02T09:00:00")).toContain("\"2026-03-02T09:00:00\"")
  })

  it("instants compare by moment, whatever their offsets", () => {
    const a = Schema.decodeSync(Instant)("2026-03-02T09:00:00-05:00")
    const b = Schema.decodeSync(Instant)("2026-03-02T14:00:00Z")
    const c = Schema.decodeSync(Instant)("2026-03-02T14:00:00.000000001Z")
    expect(sameInstant(a, b)).toBe(true)
    expect(sameInstant(b, c)).toBe(false)
    expect(instantToUtc(a)).toBe("2026-03-02T14:00:00.000000000Z")
    expect(instantToUtc(c)).toBe("2026-03-02T14:00:00.000000001Z")
    expect(parseInstant("2026-03-02T09:00:00+14:00")).toBe(BigInt(Date.UTC(2026, 2, 1, 19)) * 1_000_000n)
  })
})

describe("TimeZone", () => {
  it.each(["America/New_York", "Europe/Berlin", "UTC", "Asia/Kolkata", "America/Argentina/Buenos_Aires"])(
    "Operation rule 8: the IANA name %s is accepted",
    (zone) => {
      expect(refusal(TimeZone, zone)).toBe("accepted")
    }
  )

  it.each(["Mars/Olympus_Mons", "+05:00", "EST-5", "", "America/New York", "GMT+5"])(
    "Operation rule 8: %j is not an IANA time zone name and is refused",
    (zone) => {
      expect(refusal(TimeZone, zone)).toMatch(/expected an IANA time zone name/)
    }
  )
})

describe("keys and ids", () => {
  const hex64 = "a".repeat(64)

  it("idempotency_key: exactly 64 hexadecimal characters", () => {
    expect(refusal(IdempotencyKey, hex64)).toBe("accepted")
    expect(refusal(IdempotencyKey, "ABCDEF0123".repeat(6) + "abcd")).toBe("accepted")
    for (const bad of ["a".repeat(63), "a".repeat(65), "g".repeat(64), ` ${"a".repeat(63)}`, ""]) {
      expect(refusal(IdempotencyKey, bad)).toMatch(/exactly 64 hexadecimal characters/)
    }
  })

  it("JSON-RPC request ID length: exactly 24 characters", () => {
    expect(refusal(JsonRpcId, "x".repeat(24))).toBe("accepted")
    expect(refusal(JsonRpcId, "x".repeat(23))).toMatch(/exactly 24 characters/)
    expect(refusal(JsonRpcId, "x".repeat(25))).toMatch(/exactly 24 characters/)
    expect(refusal(JsonRpcId, 123456789012345678901234)).not.toBe("accepted")
  })

  it("receipt ids are nonblank", () => {
    expect(refusal(NonBlankString, "crm-1")).toBe("accepted")
    expect(refusal(NonBlankString, "")).toMatch(/must not be blank/)
    expect(refusal(NonBlankString, " \t\n")).toMatch(/must not be blank/)
  })
})
