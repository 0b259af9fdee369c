/**
 * The six svc.crm.v1 operations as the reference CRM performs them,
 * independent of transport (Operation rules 1–6, Idempotency rule 1). The
 * REST and MCP transports both call this service after authentication and
 * validation, so the two cannot drift apart.
 */
import { Operations, Values } from "@crm-relay/contract"
import { Context, Data, Effect, Layer, Option } from "effect"
import { BridgeStore } from "./BridgeStore.js"
import type { Calendar } from "./Calendar.js"
import { instantMs, openings, withinOpeningHours } from "./Calendar.js"

/** Why an operation was refused, with the HTTP status both transports answer. */
export class OperationRefused extends Data.TaggedError("OperationRefused")<{
  readonly status: 400 | 404 | 409
  readonly reason: "not_supported" | "unknown_contact" | "slot_taken" | "slot_unavailable"
  readonly message: string
}> {}

/** What the bridge advertises and serves. */
export interface BridgeProfile {
  /** Operations listed by capabilities; any other (except capabilities itself) answers 404. */
  readonly operations: ReadonlyArray<Operations.OperationName>
  readonly bookingClosesAvailability: boolean
  readonly calendar: Calendar
}

/** The operations service. Every method takes the authorized tenant. */
export class BridgeOperations extends Context.Tag("@crm-relay/reference-bridge/BridgeOperations")<BridgeOperations, {
  readonly capabilities: (
    tenantId: string,
    request: Operations.CapabilitiesRequest
  ) => Effect.Effect<Operations.CapabilitiesResponse, OperationRefused>
  readonly contactsSearch: (
    tenantId: string,
    request: Operations.ContactsSearchRequest
  ) => Effect.Effect<Operations.ContactsSearchResponse, OperationRefused>
  readonly contactsUpsert: (
    tenantId: string,
    request: Operations.ContactsUpsertRequest
  ) => Effect.Effect<Operations.ContactsUpsertResponse, OperationRefused>
  readonly availabilityList: (
    tenantId: string,
    request: Operations.AvailabilityListRequest
  ) => Effect.Effect<Operations.AvailabilityListResponse, OperationRefused>
  readonly appointmentsCreate: (
    tenantId: string,
    request: Operations.AppointmentsCreateRequest
  ) => Effect.Effect<Operations.AppointmentsCreateResponse, OperationRefused>
  readonly leadsCreate: (
    tenantId: string,
    request: Operations.LeadsCreateRequest
  ) => Effect.Effect<Operations.LeadsCreateResponse, OperationRefused>
}>() {}

/** Builds the operations on the `BridgeStore` in context. */
export const make = (profile: BridgeProfile): Effect.Effect<BridgeOperations["Type"], never, BridgeStore> =>
  Effect.gen(function*() {
    const store = yield* BridgeStore
    const { calendar } = profile

    /** Refuses an operation the bridge does not advertise. */
    const supported = (operation: Operations.OperationName) =>
      profile.operations.includes(operation)
        ? Effect.void
        : Effect.fail(
          new OperationRefused({ status: 404, reason: "not_supported", message: `${operation} is not supported by this bridge` })
        )

    return BridgeOperations.of({
      // Operation rule 1: the exact version and only the operations this bridge serves.
      capabilities: Effect.fn("BridgeOperations.capabilities")(function*() {
        return {
          contract_version: Values.CONTRACT_VERSION,
          operations: profile.operations,
          booking_closes_availability: profile.bookingClosesAvailability
        }
      }),

      // Operation rule 2: a real match or null, never an invented one.
      contactsSearch: Effect.fn("BridgeOperations.contactsSearch")(
        function*(tenantId: string, request: Operations.ContactsSearchRequest) {
          yield* supported("contacts.search")
          const id = yield* store.searchContact(tenantId, request.phone, request.email)
          return {
            contact: Option.match(id, {
              onNone: () => null,
              onSome: (value) => ({ id: Values.NonBlankString.make(value) })
            })
          }
        }
      ),

      // Operation rule 3: match by phone or email identity before creating.
      contactsUpsert: Effect.fn("BridgeOperations.contactsUpsert")(
        function*(tenantId: string, request: Operations.ContactsUpsertRequest) {
          yield* supported("contacts.upsert")
          return yield* store.upsertContact(tenantId, request.idempotency_key, request.contact)
        }
      ),

      // Operation rule 4: at most 50 real openings inside the interval; a read reserves nothing.
      availabilityList: Effect.fn("BridgeOperations.availabilityList")(
        function*(tenantId: string, request: Operations.AvailabilityListRequest) {
          yield* supported("availability.list")
          const booked = yield* store.bookedIntervals(
            tenantId,
            instantMs(request.window.start),
            instantMs(request.window.end)
          )
          return { slots: openings(calendar, request.window, booked, Operations.MAX_SLOTS) }
        }
      ),

      // Operation rule 5: check capacity and create atomically; 409 when taken; the receipt echoes the request.
      appointmentsCreate: Effect.fn("BridgeOperations.appointmentsCreate")(
        function*(tenantId: string, request: Operations.AppointmentsCreateRequest) {
          yield* supported("appointments.create")
          const { appointment } = request
          const startMs = instantMs(appointment.start)
          const endMs = instantMs(appointment.end)
          if (!withinOpeningHours(calendar, appointment.timezone, startMs, endMs)) {
            return yield* new OperationRefused({
              status: 409,
              reason: "slot_unavailable",
              message: "the requested interval is outside the opening hours"
            })
          }
          return yield* store.createAppointment(tenantId, request.idempotency_key, {
            appointment,
            startMs,
            endMs,
            capacity: calendar.capacity
          }).pipe(
            Effect.catchTags({
              SlotTaken: (e) => new OperationRefused({ status: 409, reason: "slot_taken", message: e.message }),
              UnknownContact: (e) => new OperationRefused({ status: 400, reason: "unknown_contact", message: e.message })
            })
          )
        }
      ),

      // Operation rule 6: create, or the existing lead for the same idempotency key.
      leadsCreate: Effect.fn("BridgeOperations.leadsCreate")(
        function*(tenantId: string, request: Operations.LeadsCreateRequest) {
          yield* supported("leads.create")
          return yield* store.createLead(tenantId, request.idempotency_key, request.lead)
        }
      )
    })
  })

/** The operations for `profile`, on the `BridgeStore` in context. */
export const layer = (profile: BridgeProfile): Layer.Layer<BridgeOperations, never, BridgeStore> =>
  Layer.effect(BridgeOperations, make(profile))
