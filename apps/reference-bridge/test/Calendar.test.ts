/**
 * The calendar behind availability.list and appointments.create: openings
 * in a time zone (across DST), request windows, capacity, the 50-slot cap.
 */
import { Resources } from "@crm-relay/contract"
import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as Calendar from "../src/Calendar.js"
import * as Zone from "../src/internal/zone.js"
import { window } from "./support/fixtures.js"

const decodeWindow = Schema.decodeUnknownSync(Resources.AvailabilityWindow)
const calendar = (options: Calendar.CalendarOptions = {}) => Either.getOrThrow(Calendar.make(options))
const starts = (slots: ReadonlyArray<Resources.Slot>) => slots.map((s) => s.start)

describe("Calendar", () => {
  it("formats instants with the zone's offset on both sides of a DST change", () => {
    expect(Zone.formatInstant("America/New_York", Date.UTC(2026, 2, 6, 14))).toBe("2026-03-06T09:00:00-05:00")
    expect(Zone.formatInstant("America/New_York", Date.UTC(2026, 2, 9, 13))).toBe("2026-03-09T09:00:00-04:00")
    expect(Zone.localToEpochMs("America/New_York", { year: 2026, month: 3, day: 9 }, 540)).toBe(Date.UTC(2026, 2, 9, 13))
    expect(Zone.formatInstant("Asia/Kolkata", Date.UTC(2026, 0, 1))).toBe("2026-01-01T05:30:00+05:30")
  })

  it("Operation rule 4: openings follow the opening hours in the request's zone, across DST", () => {
    const slots = Calendar.openings(
      calendar({ openingHours: [[4, 540, 660], [0, 540, 660]] }),
      decodeWindow(window("2026-03-06T00:00:00-05:00", "2026-03-10T00:00:00-04:00")),
      [],
      50
    )
    expect(starts(slots)).toEqual([
      "2026-03-06T09:00:00-05:00",
      "2026-03-06T10:00:00-05:00",
      "2026-03-09T09:00:00-04:00",
      "2026-03-09T10:00:00-04:00"
    ])
  })

  it("Operation rule 4: a calendar in its own zone is reported in the request's zone", () => {
    const slots = Calendar.openings(
      calendar({ timezone: "Europe/Berlin", openingHours: [[0, 540, 600]] }),
      decodeWindow(window("2026-03-02T00:00:00-05:00", "2026-03-03T00:00:00-05:00")),
      [],
      50
    )
    expect(slots).toEqual([{ start: "2026-03-02T03:00:00-05:00", end: "2026-03-02T04:00:00-05:00", timezone: "America/New_York" }])
  })

  it("Operation rule 4: only slots wholly inside the interval and the request's weekly windows", () => {
    const slots = Calendar.openings(
      calendar({ slotMinutes: 30 }),
      decodeWindow(window("2026-03-02T09:15:00-05:00", "2026-03-03T16:59:00-05:00", { windows: [[0, 600, 690], [1, 960, 1020]] })),
      [],
      50
    )
    expect(starts(slots)).toEqual([
      "2026-03-02T10:00:00-05:00",
      "2026-03-02T10:30:00-05:00",
      "2026-03-02T11:00:00-05:00",
      "2026-03-03T16:00:00-05:00"
    ])
  })

  it("Operation rule 4: full slots are left out; capacity counts overlapping bookings", () => {
    const w = decodeWindow(window("2026-03-02T09:00:00-05:00", "2026-03-02T12:00:00-05:00"))
    const booked = [{ startMs: Date.UTC(2026, 2, 2, 15), endMs: Date.UTC(2026, 2, 2, 16) }]
    expect(starts(Calendar.openings(calendar(), w, booked, 50))).toEqual([
      "2026-03-02T09:00:00-05:00",
      "2026-03-02T11:00:00-05:00"
    ])
    expect(Calendar.openings(calendar({ capacity: 2 }), w, booked, 50)).toHaveLength(3)
  })

  it("Operation rule 4: never more than the limit, in start order, each end after start", () => {
    const slots = Calendar.openings(
      calendar({ openingHours: [0, 1, 2, 3, 4, 5, 6].map((d) => [d, 0, 1440] as const), slotMinutes: 15 }),
      decodeWindow(window("2026-03-02T00:00:00Z", "2027-03-02T00:00:00Z", { timezone: "UTC" })),
      [],
      50
    )
    expect(slots).toHaveLength(50)
    const ms = slots.map((s) => new Date(s.start).getTime())
    expect(ms).toEqual([...ms].sort((a, b) => a - b))
    expect(slots.every((s) => new Date(s.end).getTime() > new Date(s.start).getTime())).toBe(true)
  })

  it("Operation rule 5: a booking must lie inside one opening", () => {
    const c = calendar()
    const at = (h: number) => Date.UTC(2026, 2, 2, h)
    expect(Calendar.withinOpeningHours(c, "America/New_York", at(14), at(15))).toBe(true) // 09:00–10:00
    expect(Calendar.withinOpeningHours(c, "America/New_York", at(21), at(22) + 1)).toBe(false) // past 17:00
    expect(Calendar.withinOpeningHours(c, "America/New_York", at(13), at(14))).toBe(false) // 08:00
    expect(Calendar.withinOpeningHours(c, "America/New_York", Date.UTC(2026, 2, 7, 15), Date.UTC(2026, 2, 7, 16))).toBe(false)
  })

  it("invalid calendar options are refused with a reason", () => {
    expect(Calendar.make({ timezone: "Mars/Base" })).toEqual(Either.left(expect.stringContaining("IANA")))
    expect(Either.isLeft(Calendar.make({ openingHours: [[7, 0, 60]] }))).toBe(true)
    expect(Either.isLeft(Calendar.make({ openingHours: [[0, 600, 540]] }))).toBe(true)
    expect(Either.isLeft(Calendar.make({ slotMinutes: 0 }))).toBe(true)
    expect(Either.isLeft(Calendar.make({ capacity: 0 }))).toBe(true)
  })
})
