/**
 * Wall-clock arithmetic in IANA time zones with nothing but `Intl`: the
 * offset of a zone at an instant, the instant of a local date and minute,
 * and offset-aware ISO 8601 formatting.
 */

/** A calendar date (no time, no zone). */
export interface LocalDate {
  readonly year: number
  readonly month: number // 1–12
  readonly day: number
}

const formatters = new Map<string, Intl.DateTimeFormat>()

const formatter = (zone: string): Intl.DateTimeFormat => {
  let f = formatters.get(zone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit"
    })
    formatters.set(zone, f)
  }
  return f
}

interface WallClock extends LocalDate {
  readonly hour: number
  readonly minute: number
  readonly second: number
}

const wallClock = (zone: string, epochMs: number): WallClock => {
  const parts: Record<string, number> = {}
  for (const part of formatter(zone).formatToParts(new Date(epochMs))) {
    if (part.type !== "literal") parts[part.type] = Number(part.value)
  }
  return {
    year: parts["year"]!,
    month: parts["month"]!,
    day: parts["day"]!,
    hour: parts["hour"]!,
    minute: parts["minute"]!,
    second: parts["second"]!
  }
}

/** Minutes east of UTC that `zone` observes at `epochMs` (e.g. -300 for New York in winter). */
export const offsetMinutes = (zone: string, epochMs: number): number => {
  const w = wallClock(zone, epochMs)
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second)
  const floored = Math.floor(epochMs / 1000) * 1000
  return Math.round((asUtc - floored) / 60_000)
}

/** The local date of `epochMs` in `zone`. */
export const localDate = (zone: string, epochMs: number): LocalDate => {
  const { day, month, year } = wallClock(zone, epochMs)
  return { year, month, day }
}

/** Minute of the day (0–1439) of `epochMs` in `zone`. */
export const minuteOfDay = (zone: string, epochMs: number): number => {
  const w = wallClock(zone, epochMs)
  return w.hour * 60 + w.minute
}

/** Day of week of a date, 0 = Monday … 6 = Sunday (the contract's numbering). */
export const weekday = (date: LocalDate): number => (new Date(Date.UTC(date.year, date.month - 1, date.day)).getUTCDay() + 6) % 7

/** The date `days` after `date`. */
export const addDays = (date: LocalDate, days: number): LocalDate => {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days))
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() }
}

/** Orders two dates. */
export const compareDates = (a: LocalDate, b: LocalDate): number =>
  a.year - b.year || a.month - b.month || a.day - b.day

/**
 * The instant at which the wall clock in `zone` shows `date` plus `minute`
 * minutes. In a DST gap the later offset wins; in an overlap, the earlier instant.
 */
export const localToEpochMs = (zone: string, date: LocalDate, minute: number): number => {
  const guess = Date.UTC(date.year, date.month - 1, date.day, 0, minute)
  const first = guess - offsetMinutes(zone, guess) * 60_000
  const second = guess - offsetMinutes(zone, first) * 60_000
  return Math.min(first, second)
}

const pad = (n: number, width = 2): string => String(n).padStart(width, "0")

/** `epochMs` as an offset-aware ISO 8601 instant in `zone`: `2026-03-02T09:00:00-05:00`. */
export const formatInstant = (zone: string, epochMs: number): string => {
  const w = wallClock(zone, epochMs)
  const offset = offsetMinutes(zone, epochMs)
  const sign = offset < 0 ? "-" : "+"
  const abs = Math.abs(offset)
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${sign}${
    pad(Math.floor(abs / 60))
  }:${pad(abs % 60)}`
}
