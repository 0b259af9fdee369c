/**
 * The bookable calendar behind the reference bridge: weekly opening hours,
 * a slot length and a capacity. availability.list and appointments.create
 * read the same calendar, so a booking closes availability (Operation rule 1).
 */
import type { Resources } from "@crm-relay/contract"
import { Values } from "@crm-relay/contract"
import { Either } from "effect"
import * as Zone from "./internal/zone.js"

/** One weekly opening: `[day, openingMinute, closingMinute]`, day 0 is Monday (as in the contract). */
export type OpeningHours = readonly [day: number, openingMinute: number, closingMinute: number]

/** How the calendar is configured. Every field has a default. */
export interface CalendarOptions {
  /**
   * IANA zone the opening hours are read in. Default: the zone of each
   * request (`window.timezone`, `appointment.timezone`).
   */
  readonly timezone?: string
  /** Weekly opening hours. Default: Monday to Friday, 09:00–17:00. */
  readonly openingHours?: ReadonlyArray<OpeningHours>
  /** Slot length used when a request says `slot_minutes: 0`. Default 60. */
  readonly slotMinutes?: number
  /** Appointments that may overlap one instant. Default 1. */
  readonly capacity?: number
}

/** A validated calendar. */
export interface Calendar {
  readonly timezone: string | undefined
  readonly openingHours: ReadonlyArray<OpeningHours>
  readonly slotMinutes: number
  readonly capacity: number
}

/** An existing booking, as epoch milliseconds. */
export interface BookedInterval {
  readonly startMs: number
  readonly endMs: number
}

/** Monday to Friday, 09:00–17:00. */
export const DEFAULT_OPENING_HOURS: ReadonlyArray<OpeningHours> = [0, 1, 2, 3, 4].map((day) => [day, 9 * 60, 17 * 60])

/** Days scanned at most by one availability request, so a huge interval stays cheap. */
const MAX_SCAN_DAYS = 400

/** Validates calendar options, or names what is wrong. */
export const make = (options: CalendarOptions = {}): Either.Either<Calendar, string> => {
  const openingHours = options.openingHours ?? DEFAULT_OPENING_HOURS
  const slotMinutes = options.slotMinutes ?? 60
  const capacity = options.capacity ?? 1
  if (options.timezone !== undefined && !Values.isIanaTimeZone(options.timezone)) {
    return Either.left(`calendar.timezone ${JSON.stringify(options.timezone)} is not an IANA time zone`)
  }
  for (const [day, open, close] of openingHours) {
    const ints = [day, open, close].every(Number.isInteger)
    if (!ints || day < 0 || day > 6 || open < 0 || close > 1440 || close <= open) {
      return Either.left(`calendar.openingHours entry ${JSON.stringify([day, open, close])} is not [day 0–6, open, close > open]`)
    }
  }
  if (!Number.isInteger(slotMinutes) || slotMinutes < 1) {
    return Either.left("calendar.slotMinutes must be a positive integer")
  }
  if (!Number.isInteger(capacity) || capacity < 1) {
    return Either.left("calendar.capacity must be a positive integer")
  }
  return Either.right({ timezone: options.timezone, openingHours, slotMinutes, capacity })
}

/** Epoch milliseconds of a valid instant. */
export const instantMs = (instant: Values.Instant): number => Number(Values.instantNanos(instant) / 1_000_000n)

const overlapping = (booked: ReadonlyArray<BookedInterval>, startMs: number, endMs: number): number =>
  booked.filter((b) => b.startMs < endMs && b.endMs > startMs).length

/** Whether `[startMs, endMs)` lies inside one opening of `hours` read in `zone`. */
const insideHours = (hours: ReadonlyArray<OpeningHours>, zone: string, startMs: number, endMs: number): boolean => {
  const date = Zone.localDate(zone, startMs)
  const day = Zone.weekday(date)
  return hours.some(([d, open, close]) =>
    d === day && startMs >= Zone.localToEpochMs(zone, date, open) && endMs <= Zone.localToEpochMs(zone, date, close)
  )
}

/**
 * Whether an appointment `[startMs, endMs)` is a real opening: inside the
 * opening hours (read in the calendar's zone, else `requestZone`). Capacity
 * is checked by the store, inside the booking transaction.
 */
export const withinOpeningHours = (calendar: Calendar, requestZone: string, startMs: number, endMs: number): boolean =>
  endMs > startMs && insideHours(calendar.openingHours, calendar.timezone ?? requestZone, startMs, endMs)

/**
 * Operation rule 4: at most `limit` (50) real openings inside the requested
 * interval, each with end after start, in start order. A slot is an opening
 * of the calendar that fits the request's weekly windows (when supplied) and
 * is not full; it is reported in the request's zone.
 */
export const openings = (
  calendar: Calendar,
  window: Resources.AvailabilityWindow,
  booked: ReadonlyArray<BookedInterval>,
  limit: number
): Array<Resources.Slot> => {
  const zone = calendar.timezone ?? window.timezone
  const fromMs = instantMs(window.start)
  const toMs = instantMs(window.end)
  const slotMs = (window.slot_minutes > 0 ? window.slot_minutes : calendar.slotMinutes) * 60_000
  const requestWindows = window.windows
  const slots: Array<Resources.Slot> = []
  const seen = new Set<number>() // overlapping opening hours must not repeat a slot
  const lastDate = Zone.localDate(zone, toMs)
  let date = Zone.localDate(zone, fromMs)
  for (let scanned = 0; scanned < MAX_SCAN_DAYS && Zone.compareDates(date, lastDate) <= 0; scanned++) {
    const day = Zone.weekday(date)
    const hours = calendar.openingHours.filter(([d]) => d === day).sort((a, b) => a[1] - b[1])
    for (const [, open, close] of hours) {
      const closeMs = Zone.localToEpochMs(zone, date, close)
      for (let startMs = Zone.localToEpochMs(zone, date, open); startMs + slotMs <= closeMs; startMs += slotMs) {
        const endMs = startMs + slotMs
        if (startMs < fromMs || endMs > toMs || seen.has(startMs)) continue
        if (requestWindows.length > 0 && !insideHours(requestWindows, window.timezone, startMs, endMs)) continue
        if (overlapping(booked, startMs, endMs) >= calendar.capacity) continue
        seen.add(startMs)
        slots.push({
          start: Values.Instant.make(Zone.formatInstant(window.timezone, startMs)),
          end: Values.Instant.make(Zone.formatInstant(window.timezone, endMs)),
          timezone: window.timezone
        })
        if (slots.length >= limit) return slots
      }
    }
    date = Zone.addDays(date, 1)
  }
  return slots
}
