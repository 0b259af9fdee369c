import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import {
  BadRequest,
  BookingEvent,
  LeadEvent,
  NotFound,
  PerformListParams,
  RateLimited,
  SAMPLE_PREVIEW,
  PreviewRecord,
  SubscribeRequest,
  SubscribeResponse,
  subscribedEventsFor,
  Unauthorized,
  Unavailable
} from "../src/Events.js"
import * as Examples from "../src/Examples.js"

describe("subscriptions", () => {
  const decode = Schema.decodeUnknownSync(SubscribeRequest)

  it("targetUrl is required; event is optional and defaults to lead", () => {
    expect(decode({ targetUrl: "https://hooks.example.com/x" })).toEqual({
      targetUrl: "https://hooks.example.com/x",
      event: "lead"
    })
    expect(() => decode({ event: "lead" })).toThrow(/targetUrl/)
    expect(() => decode({ targetUrl: 42 })).toThrow(/targetUrl/)
  })

  it("unknown event strings are accepted (and match no fan-out)", () => {
    expect(decode({ targetUrl: "https://x.example", event: "lead.created" }).event).toBe("lead.created")
    expect(subscribedEventsFor("lead")).not.toContain("lead.created")
  })

  it("targetUrl is stored as given: not checked for reachability, scheme or range at registration", () => {
    expect(decode({ targetUrl: "http://127.0.0.1/hook" }).targetUrl).toBe("http://127.0.0.1/hook")
  })

  it("fan-out: lead → lead|all, booking → booking|all", () => {
    expect(subscribedEventsFor("lead")).toEqual(["lead", "all"])
    expect(subscribedEventsFor("booking")).toEqual(["booking", "all"])
  })

  it("the subscribe response id is a UUID", () => {
    expect(Schema.decodeUnknownSync(SubscribeResponse)(Examples.subscribeResponse)).toEqual(Examples.subscribeResponse)
    expect(() => Schema.decodeUnknownSync(SubscribeResponse)({ id: "sub_1" })).toThrow(/UUID/)
  })
})

describe("perform-list limit", () => {
  const limit = (query: Record<string, string>) =>
    Either.map(Schema.decodeUnknownEither(PerformListParams)(query), (p) => p.limit)

  it("limit is 1 to 20, default 3; the parsed value is clamped", () => {
    expect(limit({})).toEqual(Either.right(3))
    expect(limit({ limit: "7" })).toEqual(Either.right(7))
    expect(limit({ limit: "0" })).toEqual(Either.right(1))
    expect(limit({ limit: "-4" })).toEqual(Either.right(1))
    expect(limit({ limit: "21" })).toEqual(Either.right(20))
    expect(limit({ limit: "99999999999999999999" })).toEqual(Either.right(20))
  })

  it("no other query parameter is read", () => {
    expect(limit({ limit: "5", offset: "10", event: "booking" })).toEqual(Either.right(5))
  })

  it("a limit that is not an integer is refused with a readable message", () => {
    expect(Either.isLeft(limit({ limit: "ten" }))).toBe(true)
    expect(Either.isLeft(limit({ limit: "2.5" }))).toBe(true)
  })
})

describe("the Error object", () => {
  const cases = [
    [BadRequest, 400],
    [Unauthorized, 401],
    [NotFound, 404],
    [Unavailable, 502]
  ] as const

  it.each(cases)("%o encodes as exactly {error} — no _tag, no retryAfterSeconds", (cls) => {
    const wire = Schema.encodeSync(cls.wire as Schema.Schema<unknown, unknown>)(new cls({ error: "One sentence." }))
    expect(wire).toEqual({ error: "One sentence." })
  })

  it("retryAfterSeconds appears only on the rate-limit (429) response", () => {
    const wire = Schema.encodeSync(RateLimited.wire)(new RateLimited({ error: "Slow down.", retryAfterSeconds: 12 }))
    expect(wire).toEqual({ error: "Slow down.", retryAfterSeconds: 12 })
    const decoded = Schema.decodeUnknownSync(RateLimited.wire)({ error: "Slow down.", retryAfterSeconds: 12 })
    expect(decoded).toBeInstanceOf(RateLimited)
  })
})

describe("preview and event payloads", () => {
  it("the synthetic example is a valid preview record", () => {
    expect(Schema.decodeUnknownSync(PreviewRecord)(SAMPLE_PREVIEW)).toEqual(SAMPLE_PREVIEW)
  })

  it("Events rule 1: a lead event carries id, call_id, source, contact, job_type, summary, booked", () => {
    const event = Schema.decodeUnknownSync(LeadEvent)(Examples.leadEvent)
    expect(Object.keys(event)).toEqual(
      expect.arrayContaining(["id", "call_id", "source", "contact", "job_type", "summary", "booked"])
    )
    expect(() => Schema.decodeUnknownSync(LeadEvent)({ ...Examples.leadEvent, booked: true })).toThrow(/booked/)
  })

  it("Events rule 2: a booking event carries an appointment object with a status field", () => {
    expect(Schema.decodeUnknownSync(BookingEvent)(Examples.bookingEvent).appointment.status).toBe("scheduled")
    expect(() =>
      Schema.decodeUnknownSync(BookingEvent)({
        ...Examples.bookingEvent,
        appointment: { ...Examples.bookingEvent.appointment, status: "cancelled" }
      })
    ).toThrow(/status/)
  })
})
