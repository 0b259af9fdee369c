/**
 * Turns a real receipt into an invalid one of a named kind, for the
 * `InvalidReceipt` fault. Works on plain JSON (the encoded request and
 * receipt), so the same corruption serves REST bodies, MCP
 * `structuredContent` and token answers.
 */
import { Operations, Values } from "@crm-relay/contract"
import type { ReceiptKind } from "../Faults.js"
import * as Zone from "./zone.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string => (typeof u === "string" ? u : "")

const epochMs = (instant: string): number | undefined => {
  const nanos = Values.parseInstant(instant)
  return nanos === undefined ? undefined : Number(nanos / 1_000_000n)
}

/** The same instant text shifted by `minutes`, written in `zone` (or UTC when the zone is unusable). */
const shift = (instant: string, minutes: number, zone: string): string => {
  const ms = epochMs(instant)
  if (ms === undefined) return instant
  return Zone.formatInstant(Values.isIanaTimeZone(zone) ? zone : "UTC", ms + minutes * 60_000)
}

const withoutOffset = (instant: string): string => instant.replace(/(Z|[+-]\d{2}:\d{2})$/, "")

const INVALID_ZONE = "Mars/Olympus_Mons"

/** The request's availability window, for slot corruptions. */
const windowOf = (request: unknown): { start: string; end: string; timezone: string } | undefined => {
  const window = isObject(request) && isObject(request["window"]) ? request["window"] : undefined
  if (window === undefined) return undefined
  return { start: str(window["start"]), end: str(window["end"]), timezone: str(window["timezone"]) }
}

const slotAt = (zone: string, startMs: number, endMs: number) => ({
  start: Zone.formatInstant(zone, startMs),
  end: Zone.formatInstant(zone, endMs),
  timezone: zone
})

const ALL_OPERATIONS: ReadonlyArray<string> = Operations.OPERATIONS

const corruptSlots = (kind: ReceiptKind, request: unknown, receipt: Json): unknown => {
  const slots = Array.isArray(receipt["slots"]) ? receipt["slots"].filter(isObject) : []
  const window = windowOf(request)
  const fromMs = window === undefined ? undefined : epochMs(window.start)
  const toMs = window === undefined ? undefined : epochMs(window.end)
  const zone = window !== undefined && Values.isIanaTimeZone(window.timezone) ? window.timezone : "UTC"
  if (fromMs === undefined || toMs === undefined) return receipt
  switch (kind) {
    case "too_many_slots": {
      // 51 distinct slots, each inside the interval, so only the count is wrong.
      const step = Math.max(1000, Math.floor((toMs - fromMs) / (Operations.MAX_SLOTS + 1)))
      const many = Array.from({ length: Operations.MAX_SLOTS + 1 }, (_, i) =>
        slotAt(zone, fromMs + i * step, fromMs + (i + 1) * step))
      return { ...receipt, slots: many }
    }
    case "slot_outside_interval":
      return { ...receipt, slots: [...slots, slotAt(zone, fromMs - 24 * 3_600_000, fromMs - 23 * 3_600_000)] }
    case "slot_end_not_after_start":
      return { ...receipt, slots: [...slots, slotAt(zone, fromMs, fromMs)] }
    case "timestamp_without_offset": {
      const first = slots[0] ?? slotAt(zone, fromMs, Math.min(toMs, fromMs + 3_600_000))
      return { ...receipt, slots: [{ ...first, start: withoutOffset(str(first["start"])) }, ...slots.slice(1)] }
    }
    case "invalid_timezone": {
      const first = slots[0] ?? slotAt(zone, fromMs, Math.min(toMs, fromMs + 3_600_000))
      return { ...receipt, slots: [{ ...first, timezone: INVALID_ZONE }, ...slots.slice(1)] }
    }
    default:
      return receipt
  }
}

const corruptCapabilities = (kind: ReceiptKind, receipt: Json): unknown => {
  const operations = Array.isArray(receipt["operations"]) ? receipt["operations"].map(str) : []
  const without = (...names: ReadonlyArray<string>) => operations.filter((o) => !names.includes(o))
  const withAll = (...names: ReadonlyArray<string>) => [...new Set([...operations, ...names])]
  switch (kind) {
    case "unknown_contract_version":
      return { ...receipt, contract_version: "svc.crm.v2" }
    case "unknown_operation":
      return { ...receipt, operations: [...operations, "contacts.delete"] }
    case "capabilities_without_upsert":
      return { ...receipt, operations: without("contacts.upsert") }
    case "capabilities_without_write":
      return { ...receipt, operations: without("leads.create", "appointments.create", "availability.list") }
    case "availability_without_appointments":
      return {
        ...receipt,
        operations: withAll("contacts.upsert", "leads.create", "availability.list").filter((o) => o !== "appointments.create"),
        booking_closes_availability: true
      }
    case "availability_without_booking_closes":
      return {
        ...receipt,
        operations: withAll("contacts.upsert", "appointments.create", "availability.list"),
        booking_closes_availability: false
      }
    default:
      return receipt
  }
}

/**
 * `receipt` corrupted as `kind` says, for `operation` (one of the six, or
 * `oauth.token`). A kind that does not apply to the operation leaves the
 * receipt unchanged; the fault matcher never selects such a pair.
 */
export const corruptReceipt = (kind: ReceiptKind, operation: string, request: unknown, receipt: unknown): unknown => {
  if (kind === "ok_true") return { ok: true }
  if (kind === "empty_object") return {}
  if (!isObject(receipt) || !ALL_OPERATIONS.concat("oauth.token").includes(operation)) return receipt
  switch (kind) {
    case "is_new_string":
      return { ...receipt, is_new: String(receipt["is_new"]) }
    case "empty_id":
    case "blank_id": {
      const id = kind === "empty_id" ? "" : "   "
      return operation === "contacts.search" ? { contact: { id } } : { ...receipt, id }
    }
    case "confirmed_false":
      return { ...receipt, confirmed: false }
    case "shifted_start":
      return { ...receipt, start: shift(str(receipt["start"]), 30, str(receipt["timezone"])) }
    case "shifted_end":
      return { ...receipt, end: shift(str(receipt["end"]), 30, str(receipt["timezone"])) }
    case "missing_timestamp": {
      const { start: _start, ...rest } = receipt
      return rest
    }
    case "timestamp_without_offset":
    case "invalid_timezone":
      if (operation === "availability.list") return corruptSlots(kind, request, receipt)
      return kind === "invalid_timezone"
        ? { ...receipt, timezone: INVALID_ZONE }
        : { ...receipt, start: withoutOffset(str(receipt["start"])) }
    case "too_many_slots":
    case "slot_outside_interval":
    case "slot_end_not_after_start":
      return corruptSlots(kind, request, receipt)
    case "unknown_contract_version":
    case "unknown_operation":
    case "capabilities_without_upsert":
    case "capabilities_without_write":
    case "availability_without_appointments":
    case "availability_without_booking_closes":
      return corruptCapabilities(kind, receipt)
    case "invented_match":
      return { contact: { id: "ct_invented_by_fault" } }
    case "missing_contact":
      return {}
    case "token_type_not_bearer":
      return { ...receipt, token_type: "mac" }
    case "missing_access_token": {
      const { access_token: _token, ...rest } = receipt
      return rest
    }
  }
}
