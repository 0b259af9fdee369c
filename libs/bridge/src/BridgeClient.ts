/**
 * The svc.crm.v1 client of one connection: the six operations with typed
 * inputs and receipts, over whichever BridgeTransport and Credentials Layers
 * it is given.
 *
 * Each call validates its input with the contract Schema before anything is
 * sent (Operation rule 7), derives the write key once (Idempotency rule 2),
 * runs the exchange under the chosen policy, and believes only a receipt that
 * passes the operation's checks (Operation rules 1–6).
 */
import { Cause, Context, Effect, Either, Exit, Layer, Metric, MetricBoundaries, MetricKey, MetricLabel, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import { Operations, Resources, Validation, Values } from "@crm-relay/contract"
import type { BridgeError } from "./BridgeError.js"
import { Permanent } from "./BridgeError.js"
import { BridgeTransport } from "./BridgeTransport.js"
import { Credentials } from "./Credentials.js"
import * as IdempotencyKeys from "./IdempotencyKeys.js"
import * as Receipts from "./Receipts.js"
import { postCallRetry, withinInCallBudget } from "./Schedules.js"

/** A contact as callers hold it (plain strings); validated by the client. */
export type ContactInput = typeof Resources.Contact.Encoded
/** An appointment as callers hold it; offsets and end-after-start are checked before sending. */
export type AppointmentInput = typeof Resources.Appointment.Encoded
/** A lead as callers hold it. */
export type LeadInput = typeof Resources.Lead.Encoded
/** An availability window as callers hold it. */
export type AvailabilityWindowInput = typeof Resources.AvailabilityWindow.Encoded
/** A contacts.search query; either may be empty. */
export interface ContactQuery {
  readonly phone: string
  readonly email: string
}

/**
 * How a call is run:
 * - `single` (default): one exchange (plus the one OAuth 401 replay);
 * - `in-call`: one exchange bounded by `Schedules.inCallBudget`;
 * - `post-call`: retried on `Schedules.postCallRetry` with the same key.
 */
export type CallPolicy = "single" | "in-call" | "post-call"

/** Options of one call. */
export interface CallOptions {
  readonly policy?: CallPolicy | undefined
}

/** The client of one bridge connection. */
export class BridgeClient extends Context.Tag("@crm-relay/bridge/BridgeClient")<
  BridgeClient,
  {
    /** The tenant this connection's credential is bound to. */
    readonly tenantId: string
    /** Connecting runs the capabilities check only; it writes nothing. */
    readonly connect: (options?: CallOptions) => Effect.Effect<Operations.CapabilitiesResponse, BridgeError>
    readonly capabilities: (options?: CallOptions) => Effect.Effect<Operations.CapabilitiesResponse, BridgeError>
    readonly contactsSearch: (
      query: ContactQuery,
      options?: CallOptions
    ) => Effect.Effect<Operations.ContactsSearchResponse, BridgeError>
    readonly contactsUpsert: (
      contact: ContactInput,
      options?: CallOptions
    ) => Effect.Effect<Operations.ContactsUpsertResponse, BridgeError>
    readonly availabilityList: (
      window: AvailabilityWindowInput,
      options?: CallOptions
    ) => Effect.Effect<Operations.AvailabilityListResponse, BridgeError>
    readonly appointmentsCreate: (
      appointment: AppointmentInput,
      options?: CallOptions
    ) => Effect.Effect<Operations.AppointmentsCreateResponse, BridgeError>
    readonly leadsCreate: (
      lead: LeadInput,
      options?: CallOptions
    ) => Effect.Effect<Operations.LeadsCreateResponse, BridgeError>
  }
>() {
  /** The client for `tenantId` over the BridgeTransport and Credentials in context. */
  static layer(options: { readonly tenantId: string }): Layer.Layer<BridgeClient, never, BridgeTransport | Credentials> {
    return Layer.effect(BridgeClient, make(options))
  }
}

// A placeholder while the request is validated; the real key is derived from the validated input.
const PENDING_KEY = "0".repeat(64)

const refusal = (operation: Operations.OperationName) => (error: ParseResult.ParseError) =>
  new Permanent({
    operation,
    status: null,
    kind: "invalid_input",
    message: `The ${operation} input was refused before sending: ${Validation.describeParseError(error)}.`
  })

// Validates a whole request with its contract Schema. These Schemas only
// refine and brand strings, so the validated value is also its encoding.
const validator = <A, I>(schema: Schema.Schema<A, I>, operation: Operations.OperationName) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "ignore" })
  const refuse = refusal(operation)
  return (request: unknown): Either.Either<A, Permanent> => Either.mapLeft(decode(request), refuse)
}

const exchangesKey = MetricKey.counter("crm_relay_bridge_exchanges_total", {
  description: "Bridge exchanges (each attempt) by operation, transport and outcome (ok, conflict, transient, auth, permanent, interrupted, defect).",
  incremental: true
})
const secondsKey = MetricKey.histogram(
  "crm_relay_bridge_exchange_duration_seconds",
  MetricBoundaries.fromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "Bridge exchange latency in seconds (each attempt, receipt check included), by operation, transport and outcome."
)
/** Bridge exchanges (each attempt) by operation, transport and outcome (metric). */
export const exchanges = Metric.fromMetricKey(exchangesKey)
/** Bridge exchange latency, by operation, transport and outcome (metric). */
export const exchangeSeconds = Metric.fromMetricKey(secondsKey)

/** Every outcome of one exchange: the `outcome` label's values. */
export const OUTCOMES = ["ok", "conflict", "transient", "auth", "permanent", "interrupted", "defect"] as const
/** How one exchange ended, as the metrics name it. */
export type Outcome = typeof OUTCOMES[number]

// Each BridgeError's outcome: a new error tag fails typecheck until it is given one.
const failureOutcome = {
  Conflict: "conflict",
  Transient: "transient",
  Auth: "auth",
  Permanent: "permanent"
} as const satisfies Record<BridgeError["_tag"], Outcome>

const outcomeOf = (exit: Exit.Exit<unknown, BridgeError>): Outcome =>
  Exit.isSuccess(exit)
    ? "ok"
    : Option.match(Cause.failureOption(exit.cause), {
      onNone: () => (Cause.isInterruptedOnly(exit.cause) ? "interrupted" : "defect"),
      onSome: (error) => failureOutcome[error._tag]
    })

/** The counter and the latency histogram of one operation, transport and outcome. */
export interface ExchangeSeries {
  readonly count: Metric.Metric.Counter<number>
  readonly seconds: Metric.Metric.Histogram<number>
}

/** A transport's exchange series, one per operation (`OPERATIONS`) and outcome (`OUTCOMES`). */
export type TransportSeries = { readonly [O in Operations.OperationName]: { readonly [X in Outcome]: ExchangeSeries } }

const fromValues = <K extends string, V>(keys: ReadonlyArray<K>, make: (key: K) => V) =>
  Object.fromEntries(keys.map((key) => [key, make(key)])) as { readonly [P in K]: V }

// Made once per transport kind (the registry's kinds are few and fixed at start), each series a
// metric of its full key, so an update finds its hook without building a key.
const seriesByKind = new Map<string, TransportSeries>()

/** The exchange series of transport `kind` (the `transport` label: a kind of the TransportRegistry). */
export const exchangeSeries = (kind: string): TransportSeries => {
  let series = seriesByKind.get(kind)
  if (series === undefined) {
    series = fromValues(Operations.OPERATIONS, (operation) =>
      fromValues(OUTCOMES, (outcome) => {
        const labels = [
          MetricLabel.make("operation", operation),
          MetricLabel.make("transport", kind),
          MetricLabel.make("outcome", outcome)
        ]
        return {
          count: Metric.fromMetricKey(MetricKey.taggedWithLabels(exchangesKey, labels)),
          seconds: Metric.fromMetricKey(MetricKey.taggedWithLabels(secondsKey, labels))
        }
      }))
    seriesByKind.set(kind, series)
  }
  return series
}

const validateCapabilities = validator(Operations.CapabilitiesRequest, "capabilities")
const validateSearch = validator(Operations.ContactsSearchRequest, "contacts.search")
const validateUpsert = validator(Operations.ContactsUpsertRequest, "contacts.upsert")
const validateAvailability = validator(Operations.AvailabilityListRequest, "availability.list")
const validateAppointment = validator(Operations.AppointmentsCreateRequest, "appointments.create")
const validateLead = validator(Operations.LeadsCreateRequest, "leads.create")

/** Builds the client from the BridgeTransport and Credentials in context. */
export const make = (options: { readonly tenantId: string }) =>
  Effect.gen(function*() {
    const transport = yield* BridgeTransport
    const credentials = yield* Credentials
    const tenantId = options.tenantId
    const common = { tenant_id: tenantId, contract_version: Values.CONTRACT_VERSION }
    const clock = yield* Effect.clock

    const series = exchangeSeries(transport.kind)

    // Counts and times one attempt (outside any retry, so each attempt is one sample).
    const observed = <A>(operation: Operations.OperationName, attempt: Effect.Effect<A, BridgeError>) =>
      Effect.suspend(() => {
        const started = clock.unsafeCurrentTimeNanos()
        return Effect.onExit(attempt, (exit) => {
          const observe = series[operation][outcomeOf(exit)]
          const seconds = Number(clock.unsafeCurrentTimeNanos() - started) / 1e9
          return Effect.zipRight(Metric.increment(observe.count), Metric.update(observe.seconds, seconds))
        })
      })

    // The credential's 401 policy around the transport.
    const exchange = (
      operation: Operations.OperationName,
      body: Readonly<Record<string, unknown>>,
      idempotencyKey: Values.IdempotencyKey | undefined
    ) => credentials.authorize(operation, (bearer) => transport.send({ operation, body, idempotencyKey, bearer }))

    // One exchange under the policy, believed only through the operation's receipt check.
    const call = <A>(
      operation: Operations.OperationName,
      options: CallOptions | undefined,
      request: Readonly<Record<string, unknown>>,
      idempotencyKey: Values.IdempotencyKey | undefined,
      receipt: (answer: unknown, status: number | null) => Either.Either<A, Permanent>
    ): Effect.Effect<A, BridgeError> => {
      const once = observed(
        operation,
        Effect.flatMap(exchange(operation, request, idempotencyKey), (answer) => receipt(answer.receipt, answer.status))
      )
      const policy = options?.policy ?? "single"
      const bounded = policy === "in-call"
        ? withinInCallBudget(operation)(once)
        : policy === "post-call"
        ? Effect.retry(once, postCallRetry)
        : once
      // No stack capture: it would cost more than the rest of the client on a fast bridge.
      return Effect.withSpan(bounded, `BridgeClient.${operation}`, {
        attributes: { tenantId, operation, transport: transport.kind, credentials: credentials.kind, policy },
        captureStackTrace: false
      })
    }

    // A write is validated with a placeholder key, then sent with the key derived from its validated input.
    const write = <R extends { readonly idempotency_key: string }, A>(
      operation: Operations.WriteOperation,
      options: CallOptions | undefined,
      validated: Either.Either<R, Permanent>,
      keyOf: (request: R) => Values.IdempotencyKey,
      receipt: (request: R, answer: unknown, status: number | null) => Either.Either<A, Permanent>
    ) =>
      Effect.flatMap(validated, (checked) => {
        const key = keyOf(checked)
        const request = { ...checked, idempotency_key: key }
        return call(operation, options, request, key, (answer, status) => receipt(request, answer, status))
      })

    // The capabilities request depends on the tenant only: validated once.
    const capabilitiesRequest = validateCapabilities(common)
    const capabilities = (options?: CallOptions) =>
      Effect.flatMap(capabilitiesRequest, (request) => call("capabilities", options, request, undefined, Receipts.capabilities))

    return BridgeClient.of({
      tenantId,
      connect: capabilities,
      capabilities,
      contactsSearch: (query, options) =>
        Effect.flatMap(
          validateSearch({ ...common, phone: query.phone, email: query.email }),
          (request) => call("contacts.search", options, request, undefined, Receipts.contactsSearch)
        ),
      contactsUpsert: (contact, options) =>
        write(
          "contacts.upsert",
          options,
          validateUpsert({ ...common, contact, idempotency_key: PENDING_KEY }),
          (request) => IdempotencyKeys.contactKey(tenantId, request.contact),
          (_, answer, status) => Receipts.contactsUpsert(answer, status)
        ),
      availabilityList: (window, options) =>
        Effect.flatMap(
          validateAvailability({ ...common, window }),
          (request) =>
            call("availability.list", options, request, undefined, (answer, status) =>
              Receipts.availabilityList(request, answer, status))
        ),
      appointmentsCreate: (appointment, options) =>
        write(
          "appointments.create",
          options,
          validateAppointment({ ...common, appointment, idempotency_key: PENDING_KEY }),
          (request) => IdempotencyKeys.appointmentKey(tenantId, request.appointment),
          Receipts.appointmentsCreate
        ),
      leadsCreate: (lead, options) =>
        write(
          "leads.create",
          options,
          validateLead({ ...common, lead, idempotency_key: PENDING_KEY }),
          (request) => IdempotencyKeys.leadKey(tenantId, request.lead),
          (_, answer, status) => Receipts.leadsCreate(answer, status)
        )
    })
  })
