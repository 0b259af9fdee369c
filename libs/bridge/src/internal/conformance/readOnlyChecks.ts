/**
 * The read-only level: capabilities, unknown fields, contacts.search,
 * availability and authentication. Nothing here writes: it is safe on a
 * production tenant.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, Option, Redacted } from "effect"
import { Operations, Values } from "@crm-relay/contract"
import type { Check, Outcome, Setup, State } from "./check.js"
import {
  advertises,
  capabilitiesOf,
  common,
  describeValue,
  fail,
  isRecord,
  notAdvertised,
  onCapabilities,
  pass,
  receiptOf,
  send,
  skip,
  usableSlots,
  warn,
  windowFor
} from "./check.js"
import { expectingRefusal, withoutCredential } from "./recorder.js"

interface SlotView {
  readonly index: number
  readonly start: unknown
  readonly end: unknown
  readonly timezone: unknown
  readonly startNanos: bigint | undefined
  readonly endNanos: bigint | undefined
}

/** The slots of the availability answer (asked once), or the outcome of a failed exchange. */
const slotsOf = (setup: Setup, state: State, cache: { value?: Either.Either<ReadonlyArray<SlotView>, Outcome> }) =>
  Effect.gen(function*() {
    if (cache.value !== undefined) return cache.value
    const window = windowFor(setup.now)
    state.window = window
    const receipt = receiptOf(setup, yield* send(setup, "availability.list", { ...common(setup), window }))
    const slots = Either.flatMap(receipt, (r): Either.Either<ReadonlyArray<SlotView>, Outcome> => {
      const list = r["slots"]
      if (!Array.isArray(list)) return Either.left(fail(`slots is ${describeValue(list)}, not an array.`))
      return Either.right(list.map((slot: unknown, index): SlotView => {
        const s = isRecord(slot) ? slot : {}
        const parse = (v: unknown) => (typeof v === "string" ? Values.parseInstant(v) : undefined)
        return { index, start: s["start"], end: s["end"], timezone: s["timezone"], startNanos: parse(s["start"]), endNanos: parse(s["end"]) }
      }))
    })
    if (Either.isRight(receipt) && Array.isArray(receipt.right["slots"])) state.slots = usableSlots(receipt.right["slots"])
    cache.value = slots
    return slots
  })

const onSlots = (
  first: boolean,
  cache: { value?: Either.Either<ReadonlyArray<SlotView>, Outcome> },
  judge: (slots: ReadonlyArray<SlotView>, window: Operations.AvailabilityListRequest["window"]) => Outcome
) =>
(setup: Setup, state: State) =>
  Effect.gen(function*() {
    yield* capabilitiesOf(setup, state)
    if (!advertises(state, "availability.list")) return notAdvertised("availability.list")
    const slots = yield* slotsOf(setup, state, cache)
    if (Either.isLeft(slots)) {
      return first || slots.left.status === "skip"
        ? slots.left
        : skip("The availability exchange did not answer slots (see availability.at_most_50).")
    }
    return judge(slots.right, state.window!)
  })

const listed = (indexes: ReadonlyArray<number>) =>
  indexes.slice(0, 5).map((i) => `slots.${i}`).join(", ") + (indexes.length > 5 ? ` and ${indexes.length - 5} more` : "")

export const readOnly = (): ReadonlyArray<Check> => {
  const slotCache: { value?: Either.Either<ReadonlyArray<SlotView>, Outcome> } = {}
  return [
    {
      id: "capabilities.version",
      level: "read-only",
      section: "Versioning 1",
      rule: "Every request declares contract_version `svc.crm.v1`. The capabilities response returns the exact version.",
      hint: "Answer capabilities with \"contract_version\": \"svc.crm.v1\", exactly.",
      run: onCapabilities(true, (r) =>
        r["contract_version"] === Values.CONTRACT_VERSION
          ? pass(`contract_version is ${Values.CONTRACT_VERSION}.`)
          : fail(`contract_version is ${describeValue(r["contract_version"])}, not ${Values.CONTRACT_VERSION}.`))
    },
    {
      id: "capabilities.operations",
      level: "read-only",
      section: "Operation rules 1",
      rule: "capabilities: return the exact contract version and only supported operation names.",
      hint: `List only operation names of the contract (${Operations.OPERATIONS.join(", ")}) that the bridge serves.`,
      run: onCapabilities(false, (r) => {
        const operations = r["operations"]
        if (!Array.isArray(operations)) return fail(`operations is ${describeValue(operations)}, not an array of names.`)
        const known: ReadonlyArray<unknown> = Operations.OPERATIONS
        const unknown = operations.filter((op) => !known.includes(op))
        return unknown.length === 0
          ? pass(`operations: ${operations.join(", ")}.`)
          : fail(`operations lists ${unknown.length} name(s) the contract does not define (${unknown.map(describeValue).slice(0, 3).join(", ")}).`)
      })
    },
    {
      id: "capabilities.required",
      level: "read-only",
      section: "What the service does",
      rule: "Required support: contacts.upsert, and at least one of leads.create or appointments.create.",
      hint: "Implement and advertise contacts.upsert and at least one of leads.create or appointments.create.",
      run: onCapabilities(false, (r) => {
        const operations = Array.isArray(r["operations"]) ? r["operations"] : []
        const missing = [
          ...(operations.includes("contacts.upsert") ? [] : ["contacts.upsert"]),
          ...(operations.includes("leads.create") || operations.includes("appointments.create") ? [] : ["leads.create or appointments.create"])
        ]
        return missing.length === 0 ? pass("contacts.upsert and a write are advertised.") : fail(`Not advertised: ${missing.join("; ")}.`)
      })
    },
    {
      id: "capabilities.availability",
      level: "read-only",
      section: "Operation rules 1",
      rule: "When availability.list is advertised, appointments.create must also be implemented and booking_closes_availability must be true for the same calendar.",
      hint: "Advertise availability.list only with appointments.create, and answer \"booking_closes_availability\": true (a boolean).",
      run: onCapabilities(false, (r) => {
        const closes = r["booking_closes_availability"]
        if (typeof closes !== "boolean") return fail(`booking_closes_availability is ${describeValue(closes)}, not a boolean.`)
        const operations = Array.isArray(r["operations"]) ? r["operations"] : []
        if (!operations.includes("availability.list")) return pass("availability.list is not advertised.")
        if (!operations.includes("appointments.create")) return fail("availability.list is advertised without appointments.create.")
        return closes ? pass("availability.list comes with appointments.create and booking_closes_availability true.") : fail(
          "availability.list is advertised but booking_closes_availability is false."
        )
      })
    },
    {
      id: "request.unknown_fields",
      level: "read-only",
      section: "Serialization rules 3",
      rule: "Bridges accept additional unknown fields (additive compatibility).",
      hint: "Ignore request fields the bridge does not know instead of refusing the request.",
      run: (setup, state) =>
        Effect.gen(function*() {
          const baseline = yield* capabilitiesOf(setup, state)
          if (Either.isLeft(baseline)) return skip("The plain capabilities exchange failed first (see capabilities.version).")
          const probe = receiptOf(
            setup,
            yield* send(setup, "capabilities", { ...common(setup), x_conformance_probe: { added_in: "a later minor version" } })
          )
          return Either.match(probe, {
            onLeft: (outcome) =>
              outcome.status === "skip" ? outcome : fail(`A capabilities request with one unknown field was refused: ${outcome.detail}`),
            onRight: () => pass("A capabilities request with an unknown field was answered like the plain one.")
          })
        })
    },
    {
      id: "contacts.search.no_invented_match",
      level: "read-only",
      section: "Operation rules 2",
      rule: "contacts.search: never invent a match. Null when nothing matches.",
      hint: "Answer {\"contact\": null} when no contact has the phone or email; never a nearest or default contact.",
      run: (setup, state) =>
        Effect.gen(function*() {
          yield* capabilitiesOf(setup, state)
          if (!advertises(state, "contacts.search")) return notAdvertised("contacts.search")
          const email = `crm-relay-conformance-${randomBytes(8).toString("hex")}@example.invalid`
          const receipt = receiptOf(setup, yield* send(setup, "contacts.search", { ...common(setup), phone: "", email }))
          if (Either.isLeft(receipt)) return receipt.left
          const contact = receipt.right["contact"]
          return contact === null
            ? pass("An email no contact can have was answered with contact: null.")
            : fail(`An email no contact can have was answered with contact ${contact === undefined ? "missing" : "set"}, not null.`)
        })
    },
    {
      id: "availability.at_most_50",
      level: "read-only",
      section: "Operation rules 4",
      rule: "availability.list: return at most 50 real openings inside the requested interval, each with end after start.",
      hint: `Return at most ${Operations.MAX_SLOTS} slots per request, even when more are free.`,
      run: onSlots(true, slotCache, (slots) =>
        slots.length <= Operations.MAX_SLOTS
          ? pass(`${slots.length} slot(s) for a seven-day window.`)
          : fail(`${slots.length} slots were returned, more than ${Operations.MAX_SLOTS}.`))
    },
    {
      id: "availability.inside_interval",
      level: "read-only",
      section: "Operation rules 4",
      rule: "availability.list: return at most 50 real openings inside the requested interval, each with end after start.",
      hint: "Return only slots that start at or after the window's start and end at or before its end.",
      run: onSlots(false, slotCache, (slots, window) => {
        const from = Values.instantNanos(window.start)
        const to = Values.instantNanos(window.end)
        const outside = slots.filter((s) => s.startNanos !== undefined && s.endNanos !== undefined && (s.startNanos < from || s.endNanos > to))
        return outside.length === 0
          ? pass(`Every slot lies inside ${window.start} – ${window.end}.`)
          : fail(`${listed(outside.map((s) => s.index))} lie(s) outside ${window.start} – ${window.end}.`)
      })
    },
    {
      id: "availability.end_after_start",
      level: "read-only",
      section: "Operation rules 4",
      rule: "availability.list: return at most 50 real openings inside the requested interval, each with end after start.",
      hint: "Give every slot an end strictly after its start.",
      run: onSlots(false, slotCache, (slots) => {
        const bad = slots.filter((s) => s.startNanos !== undefined && s.endNanos !== undefined && s.endNanos <= s.startNanos)
        return bad.length === 0 ? pass("Every slot ends after it starts.") : fail(`${listed(bad.map((s) => s.index))} do(es) not end after start.`)
      })
    },
    {
      id: "availability.offsets",
      level: "read-only",
      section: "Operation rules 8",
      rule: "Every timestamp carries an explicit UTC offset; timezones are IANA names.",
      hint: "Write slot start and end as ISO 8601 instants with an offset, e.g. 2026-03-02T09:00:00-05:00.",
      run: onSlots(false, slotCache, (slots) => {
        const bad = slots.filter((s) => s.startNanos === undefined || s.endNanos === undefined)
        return bad.length === 0
          ? pass("Every slot start and end carries a UTC offset.")
          : fail(`${listed(bad.map((s) => s.index))} carry a start or end without an explicit offset.`)
      })
    },
    {
      id: "availability.zones",
      level: "read-only",
      section: "Operation rules 8",
      rule: "Every timestamp carries an explicit UTC offset; timezones are IANA names.",
      hint: "Give every slot an IANA timezone name such as America/New_York (not an offset or abbreviation).",
      run: onSlots(false, slotCache, (slots) => {
        const bad = slots.filter((s) => typeof s.timezone !== "string" || !Values.isIanaTimeZone(s.timezone))
        return bad.length === 0 ? pass("Every slot names an IANA timezone.") : fail(`${listed(bad.map((s) => s.index))} do(es) not name an IANA timezone.`)
      })
    },
    {
      id: "auth.no_credential",
      level: "read-only",
      section: "Authentication 1",
      rule: "Every bridge request carries credentials.",
      hint: "Answer 401 to every request without an Authorization: Bearer credential.",
      run: (setup) =>
        Effect.map(
          expectingRefusal(withoutCredential(send(setup, "capabilities", common(setup), { bearer: Redacted.make("unused") }))),
          (result) =>
            Either.isLeft(result) && result.left._tag === "Auth"
              ? pass("A request without a credential was answered 401.")
              : Either.isRight(result)
              ? fail(`A request without a credential was answered ${result.right.status}, not 401.`)
              : fail(`A request without a credential was not answered 401: ${result.left.message}`)
        )
    },
    {
      id: "auth.wrong_credential",
      level: "read-only",
      section: "Errors",
      rule: "| 401 | OAuth service accounts: one fresh grant and one replay; further 401s stop. API-key 401s require corrected access. |",
      hint: "Answer 401 when the Bearer credential is not one the bridge issued or configured.",
      run: (setup) =>
        Effect.map(
          expectingRefusal(
            send(setup, "capabilities", common(setup), { bearer: Redacted.make(`crm-relay-conformance-${randomBytes(12).toString("hex")}`) })
          ),
          (result) =>
            Either.isLeft(result) && result.left._tag === "Auth"
              ? pass("A request with a credential the bridge never issued was answered 401.")
              : Either.isRight(result)
              ? fail(`A request with a wrong credential was answered ${result.right.status}, not 401.`)
              : fail(`A request with a wrong credential was not answered 401: ${result.left.message}`)
        )
    },
    {
      id: "auth.tenant_binding",
      level: "read-only",
      section: "Authentication 4",
      rule: "Tenant binding: the bridge enforces that the presented credential belongs to the tenant_id in the body, and rejects a mismatch even when the phone number or CRM record looks valid.",
      hint: "Refuse (401) a request whose credential belongs to another tenant than its tenant_id.",
      run: (setup) =>
        Option.match(setup.otherCredentials, {
          onNone: () => Effect.succeed(skip("Give a second tenant's credential (--other-tenant-...) to check tenant binding.")),
          onSome: (other) =>
            Effect.map(
              expectingRefusal(Effect.either(other.authorize("capabilities", (bearer) =>
                setup.transport.send({ operation: "capabilities", body: common(setup), idempotencyKey: undefined, bearer })))),
              (result) =>
                Either.isRight(result)
                  ? fail(`A request for tenant ${setup.tenantId} with another tenant's credential was answered ${result.right.status}.`)
                  : result.left._tag === "Auth" || (result.left._tag === "Permanent" && result.left.kind === "rejected")
                  ? pass(`A request for tenant ${setup.tenantId} with another tenant's credential was refused (${result.left.status}).`)
                  : result.left._tag === "Permanent" && result.left.kind === "tool_error"
                  // The contract does not say how an MCP bridge signals a refusal: a bare tool error refuses, but says not why.
                  ? warn(
                    `A request for tenant ${setup.tenantId} with another tenant's credential was refused with a bare tool error (isError: true naming no status).`,
                    "Name the status in the tool error, {isError: true, structuredContent: {status: 401}}, or answer HTTP 401, so the refusal reads as the credential's."
                  )
                  : fail(`The tenant-mismatch request was not refused: ${result.left.message}`)
            )
        })
    }
  ]
}
