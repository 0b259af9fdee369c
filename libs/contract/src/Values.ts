/**
 * Value rules shared by both documents: instants, time zones, keys and ids.
 *
 * Each is a branded string Schema, so a value that passed the rule cannot be
 * confused with an unchecked string anywhere downstream.
 */
import { Schema } from "effect"

/** The one contract version this service speaks (Versioning rule 1). */
export const CONTRACT_VERSION = "svc.crm.v1" as const
/** The MCP transport protocol version (Versioning rule 4). */
export const MCP_PROTOCOL_VERSION = "2026-07-28" as const

/** `contract_version` is always exactly `svc.crm.v1`. */
export const ContractVersion = Schema.Literal(CONTRACT_VERSION).annotations({
  identifier: "ContractVersion",
  description: "Always `svc.crm.v1`."
})

/** Any JSON value, stored or shown as received (a receipt, an outcome's body). */
export const Json = Schema.Unknown.annotations({ identifier: "Json", description: "Any JSON value.", jsonSchema: {} })

/** A string with at least one non-whitespace character (receipt ids). */
export const NonBlankString = Schema.String.pipe(
  Schema.filter((s) => s.trim().length > 0, {
    message: () => "must not be blank",
    jsonSchema: { minLength: 1, pattern: "\\S" }
  }),
  Schema.brand("NonBlankString")
).annotations({
  identifier: "NonBlankString",
  description: "A string with at least one non-whitespace character.",
  arbitrary: () => (fc) => fc.string({ minLength: 1 }).filter((s) => s.trim().length > 0).map((s) => s as NonBlankString)
})
export type NonBlankString = typeof NonBlankString.Type

// ---------------------------------------------------------------------------
// Instants
// ---------------------------------------------------------------------------

const INSTANT_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:Z|([+-])(\d{2}):(\d{2}))$/

const daysInMonth = (year: number, month: number): number =>
  month === 2
    ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28)
    : [4, 6, 9, 11].includes(month)
    ? 30
    : 31

/**
 * Nanoseconds since the Unix epoch of an offset-aware ISO 8601 instant, or
 * `undefined` when the text is not one (no offset, impossible date or time).
 */
export const parseInstant = (text: string): bigint | undefined => {
  const m = INSTANT_PATTERN.exec(text)
  if (m === null) return undefined
  const [, y, mo, d, h, mi, s, frac, sign, oh, om] = m
  const year = Number(y), month = Number(mo), day = Number(d)
  const hour = Number(h), minute = Number(mi), second = s === undefined ? 0 : Number(s)
  const offsetHours = oh === undefined ? 0 : Number(oh)
  const offsetMinutes = om === undefined ? 0 : Number(om)
  if (
    month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) ||
    hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59
  ) {
    return undefined
  }
  const offset = (sign === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes)
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute - offset, second, 0)
  const nanos = frac === undefined ? 0n : BigInt(frac.padEnd(9, "0"))
  return BigInt(date.getTime()) * 1_000_000n + nanos
}

/**
 * An offset-aware ISO 8601 instant (`2026-03-02T09:00:00-05:00`, `…Z`);
 * a timestamp without an explicit offset is refused (Operation rule 8).
 */
export const Instant = Schema.String.pipe(
  Schema.filter((s) => parseInstant(s) !== undefined, {
    message: (issue) =>
      `expected an ISO 8601 instant with an explicit UTC offset (e.g. 2026-03-02T09:00:00-05:00), got ${
        JSON.stringify(issue.actual)
      }`,
    jsonSchema: { format: "date-time" }
  }),
  Schema.brand("Instant")
).annotations({
  identifier: "Instant",
  description: "Offset-aware ISO 8601 instant; a timestamp without an offset is refused.",
  arbitrary: () => (fc) =>
    fc.record({
      millis: fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2090, 0, 1) }),
      offsetQuarters: fc.integer({ min: -48, max: 56 }),
      fraction: fc.option(fc.stringMatching(/^[0-9]{1,9}$/), { nil: undefined })
    }).map(({ fraction, millis, offsetQuarters }) => formatInstant(millis, offsetQuarters * 15, fraction))
})
export type Instant = typeof Instant.Type

/** Formats epoch milliseconds at a UTC offset in minutes, with optional fraction digits. */
const formatInstant = (millis: number, offsetMinutes: number, fraction: string | undefined): Instant => {
  const local = new Date(millis + offsetMinutes * 60_000).toISOString().slice(0, 19)
  const abs = Math.abs(offsetMinutes)
  const offset = offsetMinutes === 0
    ? "Z"
    : `${offsetMinutes < 0 ? "-" : "+"}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`
  return `${local}${fraction === undefined ? "" : `.${fraction}`}${offset}` as Instant
}

/** Nanoseconds since the epoch of a valid {@link Instant}. */
export const instantNanos = (instant: Instant): bigint => parseInstant(instant)!

/** Whether two instants denote the same moment, whatever their offsets. */
export const sameInstant = (a: Instant, b: Instant): boolean => instantNanos(a) === instantNanos(b)

/** The instant in UTC with nanosecond precision: `2026-03-02T14:00:00.000000000Z`. */
export const instantToUtc = (instant: Instant): string => {
  const nanos = instantNanos(instant)
  const millis = nanos / 1_000_000n - (nanos % 1_000_000n < 0n ? 1n : 0n)
  const rest = nanos - millis * 1_000_000n
  const iso = new Date(Number(millis)).toISOString() // …T14:00:00.000Z
  return `${iso.slice(0, 23)}${rest.toString().padStart(6, "0")}Z`
}

/** Two instants where the second is strictly after the first. */
export const endAfterStart = <A extends { readonly start: Instant; readonly end: Instant }>(value: A): boolean =>
  instantNanos(value.end) > instantNanos(value.start)

// ---------------------------------------------------------------------------
// Time zones
// ---------------------------------------------------------------------------

const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/
const knownZones = new Set<string>()

/** Whether `name` is an IANA time zone name known to this runtime's tz database. */
export const isIanaTimeZone = (name: string): boolean => {
  if (knownZones.has(name)) return true
  if (!ZONE_NAME.test(name)) return false // refuses "+05:00" and other offset forms
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name })
  } catch {
    return false
  }
  knownZones.add(name)
  return true
}

/** A valid IANA time zone name such as `America/New_York` (Operation rule 8). */
export const TimeZone = Schema.String.pipe(
  Schema.filter(isIanaTimeZone, {
    message: (issue) => `expected an IANA time zone name (e.g. America/New_York), got ${JSON.stringify(issue.actual)}`
  }),
  Schema.brand("TimeZone")
).annotations({
  identifier: "TimeZone",
  description: "A valid IANA time zone name.",
  arbitrary: () => (fc) => fc.constantFrom(...Intl.supportedValuesOf("timeZone")).map((z) => z as TimeZone)
})
export type TimeZone = typeof TimeZone.Type

// ---------------------------------------------------------------------------
// Keys and ids
// ---------------------------------------------------------------------------

/** Write idempotency key: exactly 64 hexadecimal characters, opaque. */
export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[0-9a-fA-F]{64}$/, {
    message: (issue) => `expected an idempotency key of exactly 64 hexadecimal characters, got ${
      JSON.stringify(issue.actual)
    }`
  }),
  Schema.brand("IdempotencyKey")
).annotations({
  identifier: "IdempotencyKey",
  description: "64 hexadecimal characters, opaque; also sent in the Idempotency-Key header.",
  arbitrary: () => (fc) => fc.stringMatching(/^[0-9a-f]{64}$/).map((s) => s as IdempotencyKey)
})
export type IdempotencyKey = typeof IdempotencyKey.Type

/** JSON-RPC request id of the MCP transport: exactly 24 characters. */
export const JsonRpcId = Schema.String.pipe(
  Schema.filter((s) => [...s].length === 24, {
    message: (issue) => `expected a JSON-RPC request id of exactly 24 characters, got ${JSON.stringify(issue.actual)}`,
    jsonSchema: { minLength: 24, maxLength: 24 }
  }),
  Schema.brand("JsonRpcId")
).annotations({
  identifier: "JsonRpcId",
  description: "24-character JSON-RPC request id.",
  arbitrary: () => (fc) => fc.stringMatching(/^[A-Za-z0-9_-]{24}$/).map((s) => s as JsonRpcId)
})
export type JsonRpcId = typeof JsonRpcId.Type
