/**
 * What every conformance check shares: the setup it runs with, the state
 * checks pass on to each other, its outcome, and the one way it talks to the
 * bridge — through the connection's own transport and credential. A failure
 * that breaks a transport rule is left to that rule's check (the operation's
 * check skips), so one fault fails the check that names it and nothing else.
 */
import { randomBytes } from "node:crypto"
import { Effect, Either, type Option, type Redacted } from "effect"
import type { Conformance } from "@crm-relay/contract"
import { type Operations, type Resources, Values } from "@crm-relay/contract"
import type { BridgeError } from "../../BridgeError.js"
import type { BridgeTransport, TransportAnswer } from "../../BridgeTransport.js"
import type { Credentials } from "../../Credentials.js"
import type { Egress } from "../../Egress.js"
import type { Exchange } from "./recorder.js"
import { redactRemote } from "./recorder.js"

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
export interface State {
  capabilities: Either.Either<Record<string, unknown>, Outcome> | undefined
  advertised: ReadonlySet<string>
  closesAvailability: boolean
  window: Operations.AvailabilityListRequest["window"] | undefined
  /** The usable slots of `window`, in start order (the bridge's order must not choose the slot). */
  slots: ReadonlyArray<Slot>
  /** The window the booking's slot was offered in (`window`, or a later week when `window` had none free). */
  bookingWindow: Operations.AvailabilityListRequest["window"] | undefined
  contact: Written & { readonly contact: typeof Resources.Contact.Encoded } | undefined
  lead: Written | undefined
  booking: Written & { readonly start: Values.Instant; readonly end: Values.Instant } | undefined
}

/** An offered slot the check may book. */
export interface Slot {
  readonly start: Values.Instant
  readonly end: Values.Instant
  readonly timezone: Values.TimeZone
}

/** A write a later check replays: its receipt id, key and request body. */
export interface Written {
  readonly id: string
  readonly key: Values.IdempotencyKey
  readonly body: Record<string, unknown>
}

/** A check's outcome; `hint` replaces the check's own when the failure lies elsewhere (the credential, the network). */
export interface Outcome {
  readonly status: Conformance.CheckStatus
  readonly detail: string
  readonly hint?: string
}

export const pass = (detail: string): Outcome => ({ status: "pass", detail })
export const fail = (detail: string): Outcome => ({ status: "fail", detail })
export const skip = (detail: string): Outcome => ({ status: "skip", detail })
/** Passes, with a note: the bridge meets MCP's schema but not the contract's stricter wording, or answers where the contract is silent (`hint` says how to do better). */
export const warn = (detail: string, hint: string): Outcome => ({ status: "warn", detail, hint })

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
  bookingWindow: undefined,
  contact: undefined,
  lead: undefined,
  booking: undefined
})

// ---------------------------------------------------------------------------
// Exchanges
// ---------------------------------------------------------------------------

/** A random write key (keys are opaque; a fresh one proves matching by identity). */
export const freshKey = (): Values.IdempotencyKey => Values.IdempotencyKey.make(randomBytes(32).toString("hex"))

/** One operation through the connection's transport, with its credential (or `bearer` instead). */
export const send = (
  setup: Setup,
  operation: Operations.OperationName,
  body: Record<string, unknown>,
  options: { readonly key?: Values.IdempotencyKey; readonly bearer?: Redacted.Redacted<string> } = {}
): Effect.Effect<Either.Either<TransportAnswer, BridgeError>> => {
  const request = (bearer: Redacted.Redacted<string>) =>
    setup.transport.send({
      operation,
      body,
      idempotencyKey: options.key,
      bearer
    })
  return Effect.either(options.bearer === undefined ? setup.credentials.authorize(operation, request) : request(options.bearer))
}

export const common = (setup: Setup) => ({ tenant_id: setup.tenantId, contract_version: Values.CONTRACT_VERSION })

/** Failures that break a transport rule: reported by that rule's check, so the operation's check skips. */
export const transportCheckOf = (setup: Setup, error: BridgeError): string | undefined => {
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
    case "tool_error":
      return "mcp.tool_result"
    default:
      return undefined
  }
}

/** A hint for an exchange that failed before any rule could be judged. */
export const failureHint = (error: BridgeError): { readonly hint?: string } => {
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

/**
 * The seven-day availability window the check asks about, `weeksAhead` weeks after the first one
 * (tomorrow 00:00 UTC): the read-only checks judge week 0; the booking looks further when it has no free slot.
 */
export const windowFor = (now: Date, weeksAhead = 0): Operations.AvailabilityListRequest["window"] => {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1 + 7 * weeksAhead))
  const end = new Date(start.getTime() + 7 * 24 * 3600 * 1000)
  const iso = (d: Date) => Values.Instant.make(`${d.toISOString().slice(0, 19)}Z`)
  return { start: iso(start), end: iso(end), timezone: Values.TimeZone.make("Etc/UTC"), windows: [], slot_minutes: 0, job_type: "" }
}

/** The slots of an availability answer the check could book (instants with offsets, end after start, an IANA zone), in start order. */
export const usableSlots = (list: ReadonlyArray<unknown>): ReadonlyArray<Slot> =>
  list.flatMap((slot): Array<Slot & { readonly nanos: bigint }> => {
    const s = isRecord(slot) ? slot : {}
    const start = typeof s["start"] === "string" ? Values.parseInstant(s["start"]) : undefined
    const end = typeof s["end"] === "string" ? Values.parseInstant(s["end"]) : undefined
    const zone = s["timezone"]
    return start !== undefined && end !== undefined && end > start && typeof zone === "string" && Values.isIanaTimeZone(zone)
      ? [{ start: Values.Instant.make(String(s["start"])), end: Values.Instant.make(String(s["end"])), timezone: Values.TimeZone.make(zone), nanos: start }]
      : []
  })
    .sort((a, b) => (a.nanos < b.nanos ? -1 : a.nanos > b.nanos ? 1 : 0))
    .map(({ end, start, timezone }) => ({ start, end, timezone }))

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/** The receipt object of a 2xx answer, or the outcome the failure stands for. */
export const receiptOf = (setup: Setup, result: Either.Either<TransportAnswer, BridgeError>): Either.Either<Record<string, unknown>, Outcome> => {
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

export const isNonBlank = (value: unknown): value is string => typeof value === "string" && value.trim() !== ""

export const describeValue = (value: unknown): string =>
  // Only identifiers, instants and the like are shown; anything that reads like prose is reduced to its length.
  value === undefined ? "missing" : JSON.stringify(redactRemote(value))

// ---------------------------------------------------------------------------
// Read-only level
// ---------------------------------------------------------------------------

export const capabilitiesOf = (setup: Setup, state: State) =>
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
export const onCapabilities = (first: boolean, judge: (receipt: Record<string, unknown>) => Outcome) => (setup: Setup, state: State) =>
  Effect.map(capabilitiesOf(setup, state), (receipt) =>
    Either.isRight(receipt)
      ? judge(receipt.right)
      : first || receipt.left.status === "skip"
      ? receipt.left
      : skip("The capabilities exchange did not answer a receipt (see capabilities.version)."))

export const advertises = (state: State, operation: Operations.OperationName) => state.advertised.has(operation)

export const notAdvertised = (operation: Operations.OperationName) =>
  skip(`The bridge does not advertise ${operation} in capabilities.`)
