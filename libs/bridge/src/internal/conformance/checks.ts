/**
 * The conformance checks, in the order they run. Each names the contract
 * section and quotes its rule verbatim, judges one rule only, and skips
 * (never fails) when what it needs is missing or when the answer broke a
 * transport rule another check reports — so one fault fails the check that
 * names it and nothing else.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, Option, Redacted } from "effect"
import type { Conformance } from "@crm-relay/contract"
import { Mcp, Operations, Values } from "@crm-relay/contract"
import type { BridgeError } from "../../BridgeError.js"
import { Permanent } from "../../BridgeError.js"
import type { BridgeTransport, TransportAnswer } from "../../BridgeTransport.js"
import type { Credentials } from "../../Credentials.js"
import type { Egress } from "../../Egress.js"
import { CLIENT_INFO, makeRequestId } from "../../McpTransport.js"
import type { Exchange } from "./recorder.js"
import { label, redactRemote, withoutCredential } from "./recorder.js"

/** Everything a check works with. */
export interface Setup {
  readonly transportKind: string
  readonly url: string
  readonly tenantId: string
  readonly transport: BridgeTransport["Type"]
  readonly credentials: Credentials["Type"]
  /** A second tenant's credential, for the tenant-binding check. */
  readonly otherCredentials: Option.Option<Credentials["Type"]>
  /** The recording egress. */
  readonly egress: Egress["Type"]
  readonly exchanges: Effect.Effect<ReadonlyArray<Exchange>>
  readonly latencyLimitMs: number
  readonly now: Date
}

/** What checks learn from each other (filled as they run). */
interface State {
  capabilities: Either.Either<Record<string, unknown>, Outcome> | undefined
  advertised: ReadonlySet<string>
  closesAvailability: boolean
  window: Operations.AvailabilityListRequest["window"] | undefined
  slots: ReadonlyArray<{ readonly start: Values.Instant; readonly end: Values.Instant; readonly timezone: Values.TimeZone }>
  contact: { readonly id: string; readonly key: string; readonly body: Record<string, unknown> } | undefined
  lead: { readonly id: string; readonly key: string; readonly body: Record<string, unknown> } | undefined
  booking: { readonly id: string; readonly key: string; readonly body: Record<string, unknown> } | undefined
}

/** A check's outcome; `hint` replaces the check's own when the failure lies elsewhere (the credential, the network). */
export interface Outcome {
  readonly status: Conformance.CheckStatus
  readonly detail: string
  readonly hint?: string
}

const pass = (detail: string): Outcome => ({ status: "pass", detail })
const fail = (detail: string): Outcome => ({ status: "fail", detail })
const skip = (detail: string): Outcome => ({ status: "skip", detail })

/** One check: its identity, the rule it proves, and how it judges. */
export interface Check {
  readonly id: string
  readonly level: Conformance.Level
  /** Only for this transport (`rest`, `mcp`); both when absent. */
  readonly transport?: "rest" | "mcp"
  readonly section: string
  readonly rule: string
  readonly hint: string
  readonly run: (setup: Setup, state: State) => Effect.Effect<Outcome>
}

/** A fresh state. */
export const initialState = (): State => ({
  capabilities: undefined,
  advertised: new Set(),
  closesAvailability: false,
  window: undefined,
  slots: [],
  contact: undefined,
  lead: undefined,
  booking: undefined
})

// ---------------------------------------------------------------------------
// Exchanges
// ---------------------------------------------------------------------------

/** A random write key (keys are opaque; a fresh one proves matching by identity). */
const freshKey = (): Values.IdempotencyKey => randomBytes(32).toString("hex") as Values.IdempotencyKey

/** One operation through the connection's transport, with its credential (or `bearer` instead). */
const send = (
  setup: Setup,
  operation: Operations.OperationName,
  body: Record<string, unknown>,
  options: { readonly key?: string; readonly bearer?: Redacted.Redacted<string> } = {}
): Effect.Effect<Either.Either<TransportAnswer, BridgeError>> => {
  const request = (bearer: Redacted.Redacted<string>) =>
    setup.transport.send({
      operation,
      body,
      idempotencyKey: options.key as Values.IdempotencyKey | undefined,
      bearer
    })
  return Effect.either(options.bearer === undefined ? setup.credentials.authorize(operation, request) : request(options.bearer))
}

const common = (setup: Setup) => ({ tenant_id: setup.tenantId, contract_version: Values.CONTRACT_VERSION })

/** Failures that break a transport rule: reported by that rule's check, so the operation's check skips. */
const transportCheckOf = (setup: Setup, error: BridgeError): string | undefined => {
  if (error._tag !== "Permanent") return undefined
  const mcp = setup.transportKind === "mcp"
  switch (error.kind) {
    case "redirect":
      return "transport.no_redirects"
    case "encoding":
      return error.message.includes("compressed") || error.diagnosis?.reason === "encoding"
        ? "transport.uncompressed"
        : mcp
        ? "mcp.framing"
        : "rest.json_answers"
    case "malformed_json":
      return mcp ? "mcp.framing" : "rest.json_answers"
    case "protocol":
      return error.message.includes("request id") ? "mcp.request_id" : "mcp.tool_result"
    default:
      return undefined
  }
}

/** A hint for an exchange that failed before any rule could be judged. */
const failureHint = (error: BridgeError): { readonly hint?: string } => {
  switch (error._tag) {
    case "Auth":
      return { hint: "The bridge refused the credential under test: check the API key or OAuth client and that it belongs to --tenant." }
    case "Transient":
      return { hint: error.diagnosis?.nextStep ?? "The bridge answered 429/5xx or could not be reached in time: make it answer, then run the check again." }
    case "Permanent":
      return error.diagnosis === undefined ? {} : { hint: error.diagnosis.nextStep }
    case "Conflict":
      return {}
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/** The receipt object of a 2xx answer, or the outcome the failure stands for. */
const receiptOf = (setup: Setup, result: Either.Either<TransportAnswer, BridgeError>): Either.Either<Record<string, unknown>, Outcome> => {
  if (Either.isLeft(result)) {
    const error = result.left
    const other = transportCheckOf(setup, error)
    if (other !== undefined) return Either.left(skip(`The answer broke a transport rule, reported by ${other}: ${error.message}`))
    return Either.left({ ...fail(error.message), ...failureHint(error) })
  }
  return isRecord(result.right.receipt)
    ? Either.right(result.right.receipt)
    : Either.left(fail("The answer is not a JSON object, so it is not a receipt."))
}

const isNonBlank = (value: unknown): value is string => typeof value === "string" && value.trim() !== ""

const describeValue = (value: unknown): string =>
  // Only identifiers, instants and the like are shown; anything that reads like prose is reduced to its length.
  value === undefined ? "missing" : JSON.stringify(redactRemote(value))

// ---------------------------------------------------------------------------
// Read-only level
// ---------------------------------------------------------------------------

const capabilitiesOf = (setup: Setup, state: State) =>
  Effect.gen(function*() {
    if (state.capabilities !== undefined) return state.capabilities
    const receipt = receiptOf(setup, yield* send(setup, "capabilities", common(setup)))
    state.capabilities = receipt
    if (Either.isRight(receipt)) {
      const operations = receipt.right["operations"]
      state.advertised = new Set(Array.isArray(operations) ? operations.filter((op): op is string => typeof op === "string") : [])
      state.closesAvailability = receipt.right["booking_closes_availability"] === true
    }
    return receipt
  })

/** Runs `judge` on the capabilities receipt; the first capabilities check reports an exchange failure, the others skip. */
const onCapabilities = (first: boolean, judge: (receipt: Record<string, unknown>) => Outcome) => (setup: Setup, state: State) =>
  Effect.map(capabilitiesOf(setup, state), (receipt) =>
    Either.isRight(receipt)
      ? judge(receipt.right)
      : first || receipt.left.status === "skip"
      ? receipt.left
      : skip("The capabilities exchange did not answer a receipt (see capabilities.version)."))

const advertises = (state: State, operation: Operations.OperationName) => state.advertised.has(operation)

const notAdvertised = (operation: Operations.OperationName) =>
  skip(`The bridge does not advertise ${operation} in capabilities.`)

/** The availability window the check asks about: the next seven days, from tomorrow 00:00 UTC. */
const windowFor = (now: Date): Operations.AvailabilityListRequest["window"] => {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
  const end = new Date(start.getTime() + 7 * 24 * 3600 * 1000)
  const iso = (d: Date) => `${d.toISOString().slice(0, 19)}Z` as Values.Instant
  return { start: iso(start), end: iso(end), timezone: "Etc/UTC" as Values.TimeZone, windows: [], slot_minutes: 0, job_type: "" }
}

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
    if (Either.isRight(slots)) {
      state.slots = slots.right.flatMap((s) =>
        s.startNanos !== undefined && s.endNanos !== undefined && s.endNanos > s.startNanos &&
          typeof s.timezone === "string" && Values.isIanaTimeZone(s.timezone)
          ? [{ start: s.start as Values.Instant, end: s.end as Values.Instant, timezone: s.timezone as Values.TimeZone }]
          : []
      )
    }
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

const readOnly = (): ReadonlyArray<Check> => {
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
        const unknown = operations.filter((op) => !(Operations.OPERATIONS as ReadonlyArray<unknown>).includes(op))
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
          withoutCredential(send(setup, "capabilities", common(setup), { bearer: Redacted.make("unused") })),
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
          send(setup, "capabilities", common(setup), { bearer: Redacted.make(`crm-relay-conformance-${randomBytes(12).toString("hex")}`) }),
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
              Effect.either(other.authorize("capabilities", (bearer) =>
                setup.transport.send({ operation: "capabilities", body: common(setup), idempotencyKey: undefined, bearer }))),
              (result) =>
                Either.isRight(result)
                  ? fail(`A request for tenant ${setup.tenantId} with another tenant's credential was answered ${result.right.status}.`)
                  : result.left._tag === "Auth" || (result.left._tag === "Permanent" && result.left.kind === "rejected")
                  ? pass(`A request for tenant ${setup.tenantId} with another tenant's credential was refused (${result.left.status}).`)
                  : fail(`The tenant-mismatch request was not refused: ${result.left.message}`)
            )
        })
    }
  ]
}

// ---------------------------------------------------------------------------
// Write level
// ---------------------------------------------------------------------------

const LABEL = "crm-relay conformance test (safe to delete)"

const testContact = (email: string, fullName: string) => ({
  full_name: fullName,
  first_name: "Conformance",
  last_name: "Test",
  address: "",
  source: LABEL,
  call_id: "",
  phones: [],
  emails: [email],
  tags: ["crm-relay-conformance-test"]
})

const idAndFlag = (r: Record<string, unknown>): Either.Either<{ id: string; isNew: boolean }, Outcome> => {
  if (!isNonBlank(r["id"])) return Either.left(fail(`id is ${describeValue(r["id"])}, not a nonblank string.`))
  const isNew = r["is_new"]
  if (typeof isNew !== "boolean") return Either.left(fail(`is_new is ${describeValue(isNew)}, not a real boolean.`))
  return Either.right({ id: r["id"], isNew })
}

const needs = (what: string, check: string) => skip(`Needs ${what} (see ${check}).`)

const writes = (): ReadonlyArray<Check> => [
  {
    id: "contacts.upsert.creates",
    level: "writes",
    section: "Operation rules 3",
    rule: "contacts.upsert: match by phone or email identity before creating. is_new as a string (for example \"false\") is invalid.",
    hint: "Create the contact when no identity matches and answer {\"id\": \"…\", \"is_new\": true} with a JSON boolean.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const email = `crm-relay-conformance-${randomBytes(8).toString("hex")}@example.invalid`
        const key = freshKey()
        const body = { ...common(setup), contact: testContact(email, LABEL), idempotency_key: key }
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", body, { key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        if (!receipt.right.isNew) return fail("A contact with a new identity was answered is_new: false (matched something).")
        state.contact = { id: receipt.right.id, key, body }
        return pass("A new identity was created: is_new is the boolean true.")
      })
  },
  {
    id: "contacts.upsert.matches",
    level: "writes",
    section: "Contact",
    rule: "A contact upsert needs at least one usable phone or email and must match an existing identity before creating a duplicate.",
    hint: "Look the contact up by phone digits and email before creating; answer is_new: false with the existing id.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const created = state.contact
        if (created === undefined) return needs("a created contact", "contacts.upsert.creates")
        const key = freshKey()
        const original = created.body["contact"] as ReturnType<typeof testContact>
        const body = { ...common(setup), contact: { ...original, full_name: `${LABEL}, updated` }, idempotency_key: key }
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", body, { key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        if (receipt.right.isNew) return fail("The same email under a new key created another contact (is_new: true).")
        return receipt.right.id === created.id
          ? pass("The same email under a new key matched the contact (is_new: false, same id).")
          : fail("The same email under a new key answered is_new: false but another id.")
      })
  },
  {
    id: "contacts.upsert.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Store the receipt under the Idempotency-Key with the write; answer a replayed key with that receipt.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const created = state.contact
        if (created === undefined) return needs("a created contact", "contacts.upsert.creates")
        const receipt = Either.flatMap(receiptOf(setup, yield* send(setup, "contacts.upsert", created.body, { key: created.key })), idAndFlag)
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right.id === created.id && receipt.right.isNew
          ? pass("Replaying the first key answered the original receipt (same id, is_new: true).")
          : fail(`Replaying the first key answered ${receipt.right.id === created.id ? "the same id" : "another id"} with is_new: ${receipt.right.isNew}, not the original receipt.`)
      })
  },
  {
    id: "leads.create.receipt",
    level: "writes",
    section: "Operation rules 6",
    rule: "leads.create: create, or return the existing lead for the same idempotency key. A generic acknowledgement such as ok:true is not a receipt.",
    hint: "Answer leads.create with {\"id\": \"…\"}, the lead's durable id.",
    run: (setup, state) =>
      Effect.gen(function*() {
        if (!advertises(state, "leads.create")) return notAdvertised("leads.create")
        if (state.contact === undefined) return needs("a created contact", "contacts.upsert.creates")
        const key = freshKey()
        const body = {
          ...common(setup),
          lead: {
            job_type: "conformance test",
            summary: LABEL,
            notes: `${LABEL}: created by crm-relay bridge check --writes.`,
            urgency: "",
            source: LABEL,
            call_id: "",
            contact: state.contact.body["contact"]
          },
          idempotency_key: key
        }
        const receipt = receiptOf(setup, yield* send(setup, "leads.create", body, { key }))
        if (Either.isLeft(receipt)) return receipt.left
        if (!isNonBlank(receipt.right["id"])) return fail(`id is ${describeValue(receipt.right["id"])}, not a nonblank string.`)
        state.lead = { id: receipt.right["id"], key, body }
        return pass("The lead was created with a nonblank id.")
      })
  },
  {
    id: "leads.create.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Answer a replayed leads.create key with the original lead's id; create nothing.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const lead = state.lead
        if (lead === undefined) return needs("a created lead", "leads.create.receipt")
        const receipt = receiptOf(setup, yield* send(setup, "leads.create", lead.body, { key: lead.key }))
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right["id"] === lead.id
          ? pass("Replaying the key answered the original lead id.")
          : fail("Replaying the key answered another id: a second lead was created.")
      })
  },
  {
    id: "appointments.create.confirmed",
    level: "writes",
    section: "Operation rules 5",
    rule: "An unconfirmed result, a shifted time, an empty ID or a missing timestamp is a failed booking. The receipt start and end must equal the requested instants exactly.",
    hint: "Book the requested slot and answer {id, confirmed: true, start, end, timezone} echoing the requested instants.",
    run: (setup, state) =>
      Effect.gen(function*() {
        if (!advertises(state, "appointments.create")) return notAdvertised("appointments.create")
        if (!advertises(state, "availability.list")) return skip("Needs availability.list to choose an offered slot.")
        if (state.contact === undefined) return needs("a created contact", "contacts.upsert.creates")
        const slot = state.slots[0]
        if (slot === undefined) return needs("an offered slot", "availability.at_most_50")
        const key = freshKey()
        const body = {
          ...common(setup),
          appointment: {
            contact_external_id: state.contact.id,
            timezone: slot.timezone,
            start: slot.start,
            end: slot.end,
            slot_text: "",
            job_type: "conformance test",
            address: "",
            notes: `${LABEL}: created by crm-relay bridge check --writes.`,
            title: LABEL,
            source: LABEL
          },
          idempotency_key: key
        }
        const receipt = receiptOf(setup, yield* send(setup, "appointments.create", body, { key }))
        if (Either.isLeft(receipt)) return receipt.left
        const r = receipt.right
        if (r["confirmed"] !== true) return fail(`confirmed is ${describeValue(r["confirmed"])}, not true.`)
        if (!isNonBlank(r["id"])) return fail(`id is ${describeValue(r["id"])}, not a nonblank string.`)
        const same = (got: unknown, wanted: Values.Instant) => {
          const nanos = typeof got === "string" ? Values.parseInstant(got) : undefined
          return nanos !== undefined && nanos === Values.instantNanos(wanted)
        }
        if (!same(r["start"], slot.start) || !same(r["end"], slot.end)) {
          return fail(`The receipt's start/end (${describeValue(r["start"])}, ${describeValue(r["end"])}) differ from the requested ${slot.start} – ${slot.end}.`)
        }
        if (typeof r["timezone"] !== "string" || !Values.isIanaTimeZone(r["timezone"])) {
          return fail(`timezone is ${describeValue(r["timezone"])}, not an IANA name.`)
        }
        state.booking = { id: r["id"], key, body }
        return pass(`The offered slot ${slot.start} – ${slot.end} was booked and confirmed with exactly those instants.`)
      })
  },
  {
    id: "appointments.create.replay",
    level: "writes",
    section: "Idempotency rules 1",
    rule: "Persist a unique mapping from idempotency key to receipt in the same CRM transaction as each write. Replaying a write returns the original record.",
    hint: "Answer a replayed appointments.create key with the original receipt, not 409 and not a new booking.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        const receipt = receiptOf(setup, yield* send(setup, "appointments.create", booking.body, { key: booking.key }))
        if (Either.isLeft(receipt)) return receipt.left
        return receipt.right["id"] === booking.id && receipt.right["confirmed"] === true
          ? pass("Replaying the key answered the original booking.")
          : fail("Replaying the key did not answer the original booking's receipt.")
      })
  },
  {
    id: "appointments.create.conflict",
    level: "writes",
    section: "Operation rules 5",
    rule: "Return HTTP 409 when the slot is taken; never a success receipt for a different time.",
    hint: "Check capacity in the same transaction as the booking and answer 409 when the slot is taken.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        const key = freshKey()
        const result = yield* send(setup, "appointments.create", { ...booking.body, idempotency_key: key }, { key })
        if (Either.isLeft(result) && result.left._tag === "Conflict") return pass("Booking the taken slot under another key was answered 409.")
        if (Either.isRight(result)) return fail(`Booking the taken slot under another key was answered ${result.right.status}, not 409.`)
        const other = transportCheckOf(setup, result.left)
        return other === undefined
          ? fail(`Booking the taken slot was not answered 409: ${result.left.message}`)
          : skip(`The answer broke a transport rule, reported by ${other}: ${result.left.message}`)
      })
  },
  {
    id: "appointments.create.closes_availability",
    level: "writes",
    section: "Operation rules 1",
    rule: "When availability.list is advertised, appointments.create must also be implemented and booking_closes_availability must be true for the same calendar.",
    hint: "Read availability from the same calendar the booking writes to, so a booked slot is no longer offered.",
    run: (setup, state) =>
      Effect.gen(function*() {
        const booking = state.booking
        if (booking === undefined) return needs("a confirmed booking", "appointments.create.confirmed")
        if (!state.closesAvailability) return skip("The bridge does not declare booking_closes_availability.")
        const receipt = receiptOf(setup, yield* send(setup, "availability.list", { ...common(setup), window: state.window! }))
        if (Either.isLeft(receipt)) return receipt.left
        const slots = Array.isArray(receipt.right["slots"]) ? receipt.right["slots"] : []
        const appointment = booking.body["appointment"] as { start: Values.Instant; end: Values.Instant }
        const still = slots.some((s: unknown) => {
          if (!isRecord(s) || typeof s["start"] !== "string") return false
          return Values.parseInstant(s["start"]) === Values.instantNanos(appointment.start)
        })
        return still ? fail("The booked slot is still offered by availability.list.") : pass("The booked slot is no longer offered.")
      })
  }
]

// ---------------------------------------------------------------------------
// Transport rules and limits: judged over every exchange of the run, so they run last
// ---------------------------------------------------------------------------

const bridgeExchanges = (setup: Setup) =>
  Effect.map(setup.exchanges, (all) => all.filter((e) => e.purpose === "bridge"))

const mediaType = (e: Exchange) => (e.response?.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
const is2xx = (e: Exchange) => e.response !== undefined && e.response.status >= 200 && e.response.status <= 299

const decodeMessage = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Whether a JSON-RPC answer (JSON or SSE) of this exchange matches `test`. */
const mcpMessages = (e: Exchange): ReadonlyArray<unknown> => {
  if (e.response === undefined) return []
  const text = new TextDecoder().decode(e.response.body)
  return mediaType(e) === "text/event-stream"
    ? text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => decodeMessage(l.slice(5).trim()))
    : [decodeMessage(text)]
}

const finalMessage = (e: Exchange): Record<string, unknown> | undefined =>
  mcpMessages(e).find((m): m is Record<string, unknown> => isRecord(m) && ("result" in m || "error" in m) && !("method" in m))

const requestIdOf = (e: Exchange): unknown => {
  const body = decodeMessage(e.requestBody)
  return isRecord(body) ? body["id"] : undefined
}

const transportChecks = (): ReadonlyArray<Check> => [
  {
    id: "transport.no_redirects",
    level: "read-only",
    section: "Errors",
    rule: "| Other 4xx, and redirects | Permanent configuration or data failure. Redirects are not followed. |",
    hint: "Serve every operation at its own URL; answer directly instead of redirecting.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const redirects = all.filter((e) => e.response !== undefined && e.response.status >= 300 && e.response.status <= 399)
        return redirects.length === 0
          ? pass(`None of ${all.length} answers was a redirect.`)
          : fail(`${redirects.length} answer(s) were redirects (${redirects.map((e) => `${label(e)} ${e.response!.status}`).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "transport.uncompressed",
    level: "read-only",
    section: "Limits (transport rules)",
    rule: "responses are uncompressed JSON or uncompressed MCP SSE.",
    hint: "Turn response compression off for the bridge (requests say Accept-Encoding: identity).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const encoded = all.filter((e) =>
          e.error?._tag === "EgressEncodingRefused" ||
          (e.response !== undefined && !["", "identity"].includes((e.response.headers["content-encoding"] ?? "").trim().toLowerCase()))
        )
        return encoded.length === 0
          ? pass(`None of ${all.length} answers was compressed.`)
          : fail(`${encoded.length} answer(s) were compressed (${encoded.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "rest.json_answers",
    level: "read-only",
    transport: "rest",
    section: "Endpoints",
    rule: "Bodies and responses are JSON objects.",
    hint: "Answer every successful operation with Content-Type: application/json and a JSON object body.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        if (!all.some(is2xx)) return skip("No successful answer to judge.")
        const bad = all.filter(is2xx).filter((e) => {
          if (mediaType(e) !== "application/json") return true
          return !isRecord(decodeMessage(new TextDecoder().decode(e.response!.body)))
        })
        return bad.length === 0
          ? pass(`Every successful answer (${all.filter(is2xx).length}) was a JSON object with Content-Type application/json.`)
          : fail(`${bad.length} successful answer(s) were not JSON objects with Content-Type application/json (${bad.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.stateless",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Unsupported: initialize or session exchange, tool discovery, resources, prompts, sampling, elicitation, browser sign-in, input-required conversations.",
    hint: "Serve tools/call statelessly: no initialize first, no Mcp-Session-Id, one request and its answer.",
    run: (setup, state) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const sessions = all.filter((e) => e.response?.headers["mcp-session-id"] !== undefined)
        if (sessions.length > 0) return fail(`${sessions.length} answer(s) handed out an Mcp-Session-Id.`)
        return state.capabilities !== undefined && Either.isRight(state.capabilities)
          ? pass("tools/call was answered without initialize and without a session.")
          : skip("The first tools/call did not answer a receipt (see capabilities.version).")
      })
  },
  {
    id: "mcp.headers_match_body",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "The protocol version, method and tool name headers must match the JSON body.",
    hint: "Refuse (400) a tools/call whose Mcp-Name, Mcp-Method or MCP-Protocol-Version header disagrees with its body.",
    run: (setup) =>
      Effect.gen(function*() {
        // Body: a contacts.search no contact can match; header: capabilities. Both read-only: nothing is written either way.
        const body: Mcp.ToolsCallRequest = {
          jsonrpc: "2.0",
          id: Values.JsonRpcId.make(makeRequestId()),
          method: "tools/call",
          params: {
            name: Operations.TOOL_NAMES["contacts.search"],
            arguments: { ...common(setup), phone: "", email: `crm-relay-conformance-${randomBytes(8).toString("hex")}@example.invalid` },
            _meta: {
              "io.modelcontextprotocol/protocolVersion": Values.MCP_PROTOCOL_VERSION,
              "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
              "io.modelcontextprotocol/clientCapabilities": {}
            }
          }
        }
        const result = yield* Effect.either(setup.credentials.authorize("capabilities", (bearer) =>
          setup.egress.send({
            method: "POST",
            url: setup.url,
            headers: {
              "content-type": "application/json",
              "accept": Mcp.MCP_ACCEPT,
              "authorization": Redacted.make(`Bearer ${Redacted.value(bearer)}`),
              "mcp-protocol-version": Values.MCP_PROTOCOL_VERSION,
              "mcp-method": "tools/call",
              "mcp-name": Operations.TOOL_NAMES["capabilities"]
            },
            body: JSON.stringify(body),
            options: { purpose: "bridge" }
          }).pipe(Effect.mapError((error) =>
            new Permanent({
              operation: "capabilities",
              status: null,
              kind: error._tag === "EgressEncodingRefused" ? "encoding" : "egress_refused",
              message: error.message
            })
          ))))
        if (Either.isLeft(result)) {
          const other = transportCheckOf(setup, result.left)
          return other === undefined
            ? fail(`The mismatched request was not answered: ${result.left.message}`)
            : skip(`The answer broke a transport rule, reported by ${other}: ${result.left.message}`)
        }
        const status = result.right.status
        if (status >= 300 && status <= 399) return skip("The answer was a redirect, reported by transport.no_redirects.")
        if (status === 401) return skip("The bridge refused the credential (401) before judging the headers.")
        return status >= 400 && status <= 499
          ? pass(`A tools/call whose Mcp-Name disagrees with its body was refused (${status}).`)
          : fail(`A tools/call whose Mcp-Name header disagrees with its body was answered ${status}, not refused with a 4xx.`)
      })
  },
  {
    id: "mcp.framing",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response framing: a JSON body, or bounded request-scoped SSE data frames. Notifications without request IDs may precede the final response.",
    hint: "Answer tools/call as application/json (one JSON-RPC response) or text/event-stream (data frames ending with the response).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        if (!all.some(is2xx)) return skip("No successful answer to judge.")
        const bad = all.filter(is2xx).filter((e) => {
          const type = mediaType(e)
          if (type !== "application/json" && type !== "text/event-stream") return true
          return finalMessage(e) === undefined
        })
        return bad.length === 0
          ? pass(`Every successful answer (${all.filter(is2xx).length}) was JSON or SSE holding one final JSON-RPC response.`)
          : fail(`${bad.length} successful answer(s) were neither JSON nor SSE with a final JSON-RPC response (${bad.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.request_id",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object.",
    hint: "Echo the request's JSON-RPC id in the response, exactly.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const answered = all.filter(is2xx).flatMap((e) => {
          const final = finalMessage(e)
          return final === undefined ? [] : [{ e, final }]
        })
        if (answered.length === 0) return skip("No successful answer to judge.")
        const bad = answered.filter(({ e, final }) => final["id"] !== requestIdOf(e))
        return bad.length === 0
          ? pass(`Every response (${answered.length}) echoed its request id.`)
          : fail(`${bad.length} response(s) did not echo the request id (${bad.map(({ e }) => label(e)).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "mcp.tool_result",
    level: "read-only",
    transport: "mcp",
    section: "MCP transport",
    rule: "Response body shape: jsonrpc \"2.0\"; id echoing the request ID; result with resultType \"complete\", isError false on success, and structuredContent equal to the matching REST response object.",
    hint: "Answer a 2xx tools/call with result {resultType: \"complete\", isError: false, structuredContent: <REST receipt>}; no server requests.",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        if (!all.some(is2xx)) return skip("No successful answer to judge.")
        const bad = all.filter(is2xx).filter((e) => {
          const messages = mcpMessages(e)
          if (messages.some((m) => isRecord(m) && "method" in m && m["id"] !== undefined)) return true
          const final = finalMessage(e)
          if (final === undefined) return false // judged by mcp.framing
          const result = final["result"]
          return !isRecord(result) || result["resultType"] !== "complete" || result["isError"] !== false ||
            !isRecord(result["structuredContent"])
        })
        return bad.length === 0
          ? pass("Every successful answer was a complete result with isError false and structuredContent.")
          : fail(`${bad.length} successful answer(s) were not a complete tool result with structuredContent (${bad.map(label).slice(0, 3).join(", ")}).`)
      })
  },
  {
    id: "latency.deadline",
    level: "read-only",
    section: "Limits",
    rule: "| Total deadline per HTTP exchange | 10 seconds |",
    hint: "Answer every operation well within 10 seconds (the service gives up at the deadline).",
    run: (setup) =>
      Effect.map(bridgeExchanges(setup), (all) => {
        const limit = setup.latencyLimitMs
        const slowest = new Map<string, number>()
        for (const e of all) slowest.set(label(e), Math.max(slowest.get(label(e)) ?? 0, e.durationMs))
        const summary = [...slowest].map(([name, ms]) => `${name} ${Math.round(ms)} ms`).join(", ")
        const late = all.filter((e) => e.error?._tag === "EgressTimeout" || e.durationMs >= limit)
        return late.length === 0
          ? pass(`Slowest answer per operation: ${summary}.`)
          : fail(`${late.length} exchange(s) took ${limit / 1000} s or longer (${late.map(label).slice(0, 3).join(", ")}); slowest: ${summary}.`)
      })
  }
]

/** Every check in running order, for `transportKind`; write checks are listed whether or not they run. */
export const catalog = (transportKind: string): ReadonlyArray<Check> =>
  [...readOnly(), ...writes(), ...transportChecks()].filter((check) => check.transport === undefined || check.transport === transportKind)
