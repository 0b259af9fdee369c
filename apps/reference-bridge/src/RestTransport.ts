/**
 * The REST transport: libs/contract's `BridgeApi` implemented with
 * `HttpApiBuilder`, served under a base path so `{bridge_base_url}` has one.
 *
 * Authentication is the `BridgeAuthorization` middleware (Bearer API key or
 * access token → `AuthorizedTenant`). Each handler then enforces tenant
 * binding (401 on a mismatch), the Idempotency-Key header of writes, and
 * runs the operation; an `InvalidReceipt` fault corrupts the receipt.
 */
import { BridgeApi, Operations } from "@crm-relay/contract"
import type { HttpApiEndpoint } from "@effect/platform"
import { HttpApiBuilder, HttpApiError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpApp, HttpRouter } from "@effect/platform"
import { Effect, Layer, Option, Schema } from "effect"
import type { Scope } from "effect"
import type { OperationRefused } from "./BridgeOperations.js"
import { BridgeOperations } from "./BridgeOperations.js"
import { Credentials } from "./Credentials.js"
import { bearerCredential } from "./internal/bearer.js"
import { corruptReceipt } from "./internal/corruptReceipt.js"
import { currentFault, notePrincipal } from "./internal/requestContext.js"

/** `BridgeAuthorization`: a Bearer API key or live access token names the tenant. */
export const authorizationLayer: Layer.Layer<BridgeApi.BridgeAuthorization, never, Credentials> = Layer.effect(
  BridgeApi.BridgeAuthorization,
  Effect.gen(function*() {
    const credentials = yield* Credentials
    return BridgeApi.BridgeAuthorization.of({
      bridgeCredential: () =>
        Effect.gen(function*() {
          // The platform slices the header blindly; read it again to insist on the Bearer scheme.
          const request = yield* HttpServerRequest.HttpServerRequest
          const credential = bearerCredential(request.headers["authorization"])
          const principal = Option.isNone(credential) ? Option.none() : yield* credentials.authenticate(credential.value)
          if (Option.isNone(principal)) return yield* new HttpApiError.Unauthorized()
          yield* notePrincipal(principal.value)
          return { tenantId: principal.value.tenantId }
        })
    })
  })
)

type Refusal = HttpApiError.BadRequest | HttpApiError.Unauthorized

/** The HTTP answer of a refused operation: 400, 404 (unsupported) or 409 (slot taken or unavailable). */
const refusalResponse = (e: OperationRefused): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson({ error: `Refused: ${e.message}.` }, { status: e.status })

/** Runs one operation for the authorized tenant, applying tenant binding, the write key check and receipt faults. */
const serve = <A extends { readonly tenant_id: string }, B, I>(
  operation: Operations.OperationName,
  response: Schema.Schema<B, I>,
  run: (tenantId: string, request: A) => Effect.Effect<B, OperationRefused>
) => {
  const encode = Schema.encode(response)
  return (
    request: { readonly payload: A; readonly headers?: { readonly "idempotency-key": string } }
  ): Effect.Effect<B | HttpServerResponse.HttpServerResponse, Refusal, BridgeApi.AuthorizedTenant> =>
    Effect.gen(function*() {
      const { tenantId } = yield* BridgeApi.AuthorizedTenant
      // Authentication rule 4: the credential must belong to the tenant in the body.
      if (request.payload.tenant_id !== tenantId) return yield* new HttpApiError.Unauthorized()
      const bodyKey = "idempotency_key" in request.payload ? request.payload.idempotency_key : undefined
      if (request.headers !== undefined && request.headers["idempotency-key"] !== bodyKey) {
        return yield* new HttpApiError.BadRequest()
      }
      const exit = yield* Effect.either(run(tenantId, request.payload))
      if (exit._tag === "Left") return refusalResponse(exit.left)
      const fault = yield* currentFault
      if (Option.isSome(fault) && fault.value._tag === "InvalidReceipt") {
        const encoded = yield* Effect.orDie(encode(exit.right))
        return HttpServerResponse.unsafeJson(corruptReceipt(fault.value.kind, operation, request.payload, encoded))
      }
      return exit.right
    }).pipe(Effect.withSpan(`RestTransport.${operation}`))
}

/** The contract's API with every path under `basePath` (e.g. `/crm`). */
export const apiAt = (basePath: HttpApiEndpoint.PathSegment) => BridgeApi.BridgeApi.prefix(basePath)

/** The six handlers of the `bridge` group. */
export const handlersLayer = (basePath: HttpApiEndpoint.PathSegment) =>
  HttpApiBuilder.group(apiAt(basePath), "bridge", (handlers) =>
    Effect.gen(function*() {
      const ops = yield* BridgeOperations
      return handlers
        .handle("capabilities", serve("capabilities", Operations.CapabilitiesResponse, ops.capabilities))
        .handle("contactsSearch", serve("contacts.search", Operations.ContactsSearchResponse, ops.contactsSearch))
        .handle("contactsUpsert", serve("contacts.upsert", Operations.ContactsUpsertResponse, ops.contactsUpsert))
        .handle("availabilityList", serve("availability.list", Operations.AvailabilityListResponse, ops.availabilityList))
        .handle(
          "appointmentsCreate",
          serve("appointments.create", Operations.AppointmentsCreateResponse, ops.appointmentsCreate)
        )
        .handle("leadsCreate", serve("leads.create", Operations.LeadsCreateResponse, ops.leadsCreate))
    }))

/** Builds the REST transport as an HTTP app, on the `Credentials` and `BridgeOperations` in context. */
export const make = (
  basePath: HttpApiEndpoint.PathSegment
): Effect.Effect<
  HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>,
  never,
  Credentials | BridgeOperations | Scope.Scope
> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      Layer.mergeAll(
        HttpApiBuilder.api(apiAt(basePath)).pipe(
          Layer.provide(handlersLayer(basePath)),
          Layer.provide(authorizationLayer)
        ),
        HttpApiBuilder.Router.Live,
        HttpApiBuilder.Middleware.layer
      )
    )
    return yield* Effect.provide(HttpApiBuilder.httpApp, context)
  })
